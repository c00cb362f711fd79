package executor

import (
	"errors"
	"fmt"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// state is what a run knows: a fold of its journal's events. Only apply changes it, for the live
// run (journal the event, then apply it) and for a replay alike.
type state struct {
	exp      *spec.Experiment
	brackets []spec.Bracket
	model    *sim.Model // the spec's: prices, offers, node sizes
	// timeScale is wall seconds per spec second: what the views report times and costs in.
	timeScale float64
	log       io.Writer // impossible transitions are noted here: a driver bug, not fatal

	runID       string
	start       time.Time
	trials      map[string]*trialRun
	order       [][]string      // trial IDs per bracket, in sampling order
	nodes       [][]cloud.Node  // per bracket, the nodes it holds and uses
	draining    [][]cloud.Node  // per bracket, nodes being interrupted: held (billing), not used
	known       map[string]bool // every node ever journaled
	released    []nodeSpan
	synced      map[stageKey][]string // survivors of each synced stage
	stageAt     map[stageKey]window
	launches    []launchSpan
	tries       map[trialStage]int // launches journaled
	fails       map[trialStage]int // failed tries journaled: what retries are counted on
	timeouts    map[stageKey]int
	retries     map[stageKey]int
	interrupts  map[trialStage]int // tries ended by a lost node, per trial and stage
	lostTries   map[stageKey]int   // the same per stage, for the report
	interrupted []interruption     // spot nodes taken away, in order
	finished    bool
	cancelled   string            // why, once cancelled
	stopped     string            // why the last driver stopped short of the end; "" while one drives it
	stopCause   journal.StopCause // the same as a word
	launchLog   []LaunchRecord    // every launch, in journal order
	openLaunch  map[string]int    // trial -> its launch under way, in launchLog
	nodeLog     []NodeRecord      // every node, in the order it came up
	nodeAt      map[string]int    // node -> its record in nodeLog
	current     []int             // per bracket, the last stage that began
	counts      Counts
	requests    map[int]int // node requests journaled per bracket
	// open holds, per bracket and market asked ("": its stage's own; a hedged stage asks for its
	// on-demand nodes apart), the token of a request no answer was journaled for.
	open map[int]map[string]string
	// odTier holds the nodes rented for a hedged stage's on-demand tier (node_up's Tier).
	odTier    map[string]bool
	plan      sim.Alloc // the plan run: the one the run began with, as revisions changed it
	revisions []revision
	forecast  *planner.Forecast // the latest forecast of the whole run (EvForecast, EvReplan)
	evidence  map[evidenceKey]*observed
	// waveEnded holds the stages a launch of has ended: later launches are not their first wave.
	waveEnded map[stageKey]bool
	asha      *ashaState // an ASHA run's; nil for stages
	// firstEnds holds the first trials' ends of their first stage: the failure rule's evidence.
	firstEnds firstEnds
}

// openTokens are bracket b's requests no answer was journaled for, by market asked, in order.
func (s *state) openTokens(b int) []string {
	var out []string
	for _, m := range slices.Sorted(maps.Keys(s.open[b])) {
		out = append(out, s.open[b][m])
	}
	return out
}

// ashaState is what an ASHA run knows beyond what stages do: the promotion state, folded from its
// promote, done and fail events (the decisions journaled, so that a replay takes each once),
// its trials by their index in the ladder, and when each of its plan's phases began.
type ashaState struct {
	plan    sim.ASHAPlan
	ladder  *asha.Ladder
	byIndex []string
	index   map[string]int
	phaseAt []time.Time
	// enterNow is the phase a revision of the schedule begins at once (its GPUs differ from the
	// phase the run was in): phases are spans of one GPU count, so a revision that changes the
	// count now starts a phase of its own.
	enterNow int
	rungEnd  map[stageKey]time.Time // the last result of each rung so far
	end      time.Time              // when it finished
	// promoted are the trials each rung promoted, in order.
	promoted map[stageKey][]string
}

// revision is a re-plan of bracket b from stage k on (journaled as EvReplan).
type revision struct {
	bracket, stage int
	at             time.Time
	gpusBefore     []int
	event          journal.Event
}

// evidenceKey is where iterations were observed: a stage of a bracket, on trials of gpus GPUs.
type evidenceKey struct{ bracket, stage, gpus int }

// observed is what a run saw of the model at one evidenceKey, in wall seconds: iterations
// between reports, and each launch's first report (start-up and firstIters iterations); those of
// the first wave of a job's first stage apart (cold: they carry the first-stage lag too).
type observed struct {
	iterSecs, iters                 float64
	firstSecs, firstIters, launches float64
	coldSecs, coldIters, coldLaunch float64
}

type stageKey struct{ bracket, stage int }

type trialStage struct {
	trial string
	stage int
}

type window struct{ start, end time.Time }

type trialRun struct {
	id      string
	bracket int
	params  spec.Config
	state   trial.State
	done    map[int]float64 // stage -> objective metric (NaN when the trainer never reported it)
	metrics map[string]float64
	iter    int
	failed  map[int]bool
	nodes   []string // where its last launch ran
	// seen is when the trial last launched or reported, at iteration seenIter on gpus GPUs;
	// fresh until its launch's first report: what the evidence is taken from.
	seen     time.Time
	seenIter int
	gpus     int
	fresh    bool
	// cold is true for a launch of the first wave of a job's first stage: launched before any
	// launch of its stage ended, in a bracket that starts with the job.
	cold bool
}

// interruption is a spot node taken away from bracket b at a time.
type interruption struct {
	bracket int
	nodes   []string
	at      time.Time
	why     string
}

type nodeSpan struct {
	bracket  int
	node     cloud.Node
	released time.Time
}

type launchSpan struct {
	bracket    int
	gpus       int
	start, end time.Time
}

// Plan is what a journal is folded against: the experiment and the plan its run follows.
type Plan struct {
	Experiment *spec.Experiment
	Alloc      sim.Alloc
	// ASHA is an ASHA job's plan (its GPU schedule): what an ASHA experiment runs instead of Alloc.
	ASHA *sim.ASHAPlan
	// TimeScale is wall seconds per spec second (default 1): times and costs are reported in
	// spec seconds.
	TimeScale float64
}

// ErrNoASHAPlan is returned for an ASHA job run without its plan.
var ErrNoASHAPlan = errors.New("an asha job runs an asha plan (its GPU schedule): `rubberband plan` makes one")

// ErrHedged is an ASHA run given a plan with a hedged stage (sim.StageAlloc.OnDemand): ASHA's
// cluster is one market; Successive Halving and Hyperband run hedged stages.
var ErrHedged = errors.New("ASHA runs no hedged stages (on_demand_nodes): plan with cluster.hedge: false")

// openState is the empty state of a run of p: its brackets (an ASHA job's: its rungs, every
// bracket's held at the first phase's GPUs on the default offer) and its model. A plan that
// does not fit the spec is an error.
func openState(p Plan, log io.Writer) (*state, error) {
	if p.TimeScale <= 0 {
		p.TimeScale = 1
	}
	if log == nil {
		log = io.Discard
	}
	m, err := sim.NewModel(p.Experiment)
	if err != nil {
		return nil, err
	}
	a := p.Experiment.Algorithm.ASHA
	if a == nil {
		brackets := p.Experiment.Algorithm.Brackets()
		if p.Alloc != nil {
			if err := m.Check(brackets, p.Alloc); err != nil {
				return nil, fmt.Errorf("plan does not fit the spec: %w", err)
			}
		}
		return newState(p.Experiment, brackets, p.Alloc, m, p.TimeScale, log), nil
	}
	// ASHA's plan is phases of one cluster, never hedged: its re-plans keep one market.
	m.Hedge = false
	if err := refuseHedged(p.Alloc); err != nil {
		return nil, err
	}
	if p.ASHA == nil {
		return nil, ErrNoASHAPlan
	}
	ap := *p.ASHA
	if err := m.CheckASHA(ap); err != nil {
		return nil, fmt.Errorf("plan does not fit the spec: %w", err)
	}
	brackets := a.RungStages()
	plan := make(sim.Alloc, len(brackets))
	for b, br := range brackets {
		for range br.Stages {
			plan[b] = append(plan[b], sim.StageAlloc{GPUs: ap.GPUs[0], Nodes: m.NodesFor(ap.GPUs[0])})
		}
	}
	st := newState(p.Experiment, brackets, plan, m, p.TimeScale, log)
	st.asha = &ashaState{plan: ap, ladder: asha.New(*a), index: map[string]int{}, rungEnd: map[stageKey]time.Time{}, promoted: map[stageKey][]string{}}
	return st, nil
}

// refuseHedged reports a hedged stage of a plan, with ErrHedged.
func refuseHedged(a sim.Alloc) error {
	for b, stages := range a {
		for k, sa := range stages {
			if sa.OnDemand > 0 {
				return fmt.Errorf("bracket %d stage %d: %d of its %d nodes on demand: %w", b+1, k+1, sa.OnDemand, sa.Nodes, ErrHedged)
			}
		}
	}
	return nil
}

func newState(exp *spec.Experiment, brackets []spec.Bracket, plan sim.Alloc, model *sim.Model, timeScale float64, log io.Writer) *state {
	return &state{exp: exp, brackets: brackets, plan: plan.Clone(), model: model, timeScale: timeScale, log: log, trials: map[string]*trialRun{}, evidence: map[evidenceKey]*observed{},
		known: map[string]bool{},
		order: make([][]string, len(brackets)), nodes: make([][]cloud.Node, len(brackets)), draining: make([][]cloud.Node, len(brackets)),
		synced: map[stageKey][]string{}, stageAt: map[stageKey]window{}, tries: map[trialStage]int{},
		fails: map[trialStage]int{}, timeouts: map[stageKey]int{}, retries: map[stageKey]int{},
		interrupts: map[trialStage]int{}, lostTries: map[stageKey]int{}, waveEnded: map[stageKey]bool{},
		requests: map[int]int{}, open: map[int]map[string]string{}, odTier: map[string]bool{}, openLaunch: map[string]int{}, nodeAt: map[string]int{},
		current: make([]int, len(brackets))}
}

// apply folds one event into the state. It is the only place that says what an event means.
func (s *state) apply(e journal.Event) {
	key := stageKey{e.Bracket, e.Stage}
	if e.Bracket < 0 || e.Bracket >= len(s.brackets) {
		fmt.Fprintf(s.log, "journal: %s event of bracket %d, which the spec does not have: skipped\n", e.Ev, e.Bracket)
		return
	}
	switch e.Ev {
	case journal.EvLaunch, journal.EvReport, journal.EvDone, journal.EvFail, journal.EvPromote:
		if s.trials[e.Trial] == nil {
			fmt.Fprintf(s.log, "journal: %s event of trial %s, which was never sampled: skipped\n", e.Ev, e.Trial)
			return
		}
	}
	s.record(e)
	switch e.Ev {
	case journal.EvStart:
		s.start, s.runID = e.At, e.RunID
	case journal.EvTrial:
		s.trials[e.Trial] = &trialRun{id: e.Trial, bracket: e.Bracket, params: e.Params, state: trial.Pending,
			done: map[int]float64{}, failed: map[int]bool{}}
		s.order[e.Bracket] = append(s.order[e.Bracket], e.Trial)
		if a := s.asha; a != nil {
			a.index[e.Trial] = len(a.byIndex)
			a.byIndex = append(a.byIndex, e.Trial)
		}
	case journal.EvNodeUp:
		s.known[e.Node.ID] = true
		if e.Tier == spec.MarketOnDemand {
			s.odTier[e.Node.ID] = true
		}
		s.nodes[e.Bracket] = append(s.nodes[e.Bracket], *e.Node)
	case journal.EvNodeOff:
		s.dropNodes(e.Bracket, e.Nodes, e.At)
	case journal.EvInterrupt:
		if e.Draining {
			s.drainNodes(e.Bracket, e.Nodes)
		} else {
			s.dropNodes(e.Bracket, e.Nodes, e.At)
		}
		s.interrupted = append(s.interrupted, interruption{bracket: e.Bracket, nodes: e.Nodes, at: e.At, why: e.Error})
	case journal.EvStage:
		if w := s.stageAt[key]; w.start.IsZero() {
			s.stageAt[key] = window{start: e.At}
		}
	case journal.EvLaunch:
		ts := trialStage{e.Trial, e.Stage}
		s.tries[ts] = max(s.tries[ts], e.Try)
		t := s.trials[e.Trial]
		if t.params == nil && e.Params != nil { // drawn at its first launch (an adaptive sampler)
			t.params = e.Params
		}
		t.nodes = e.Nodes
		t.seen, t.seenIter, t.gpus, t.fresh = e.At, t.iter, e.GPUs, true
		t.cold = e.Stage == 0 && s.brackets[e.Bracket].Round == 0 && !s.waveEnded[key]
		s.move(t, trial.Launch)
	case journal.EvReport:
		t := s.trials[e.Trial]
		s.observe(t, e)
		t.metrics, t.iter = e.Metrics, e.Iter
	case journal.EvDone:
		t := s.trials[e.Trial]
		if e.Stage == 0 {
			s.firstEnds.note(e.Trial, "", "")
		}
		t.done[e.Stage] = metricOrNaN(e.Metric)
		t.metrics, t.iter = e.Metrics, e.Iter
		s.move(t, trial.Reached)
		s.launched(e)
		s.waveEnded[key] = true
		if a := s.asha; a != nil {
			s.noteLadder(a.ladder.Report(a.index[e.Trial], search.Loss(t.done[e.Stage], s.exp.Objective.Mode)))
			a.rungEnd[key] = e.At
		}
	case journal.EvFail:
		t := s.trials[e.Trial]
		if e.Stage == 0 {
			kind := "" // a lost node, a gang not started, a trainer that reported: nothing of a broken start
			if !e.Interrupted && !e.NotStarted && t.iter == 0 {
				kind = failureKind(e.Error, e.Trial)
			}
			s.firstEnds.note(e.Trial, kind, e.Error)
		}
		switch {
		case e.GaveUp:
			t.failed[e.Stage] = true
			s.move(t, trial.GaveUp)
			if a := s.asha; a != nil {
				s.noteLadder(a.ladder.Drop(a.index[e.Trial]))
			}
		case e.Interrupted:
			s.interrupts[trialStage{e.Trial, e.Stage}]++
			s.lostTries[key]++
			s.move(t, trial.Interrupted)
		default:
			s.retries[key]++
			s.fails[trialStage{e.Trial, e.Stage}]++
			s.move(t, trial.Crashed)
		}
		s.launched(e)
		s.waveEnded[key] = true
	case journal.EvTimeout:
		s.timeouts[key]++
	case journal.EvSync:
		s.settle(e.Bracket, e.Stage, e.Keep)
		s.synced[key] = e.Keep
		w := s.stageAt[key]
		w.end = e.At
		s.stageAt[key] = w
	case journal.EvResume:
		// A driver took over (a cancelled run only with --force: it is no longer cancelled). The
		// previous driver's gangs were ended before this event: their trials wait again.
		s.cancelled, s.stopped, s.stopCause = "", "", ""
		for _, id := range s.allTrials() {
			if t := s.trials[id]; t.state == trial.Running {
				s.move(t, trial.Interrupted)
			}
		}
	case journal.EvCancel:
		s.cancelled = e.Error
		if s.cancelled == "" {
			s.cancelled = "cancelled"
		}
	case journal.EvFinish:
		s.finished = true
		if s.asha != nil { // the trials ASHA never promoted are over
			s.asha.end = e.At
			for _, id := range s.allTrials() {
				if t := s.trials[id]; t.state == trial.Paused {
					s.move(t, trial.Cut)
				}
			}
		}
	case journal.EvPromote:
		s.promote(e)
	case journal.EvPhase:
		if a := s.asha; a != nil && e.Stage == len(a.phaseAt) && e.Stage < len(a.plan.GPUs) {
			a.phaseAt = append(a.phaseAt, e.At)
		} else {
			fmt.Fprintf(s.log, "journal: phase %d does not follow the phases so far: skipped\n", e.Stage+1)
		}
	case journal.EvStop:
		s.stopped = e.Error
		s.stopCause = journal.StopCause(e.Cause)
	case journal.EvRequest:
		s.requests[e.Bracket]++
		if s.open[e.Bracket] == nil {
			s.open[e.Bracket] = map[string]string{}
		}
		s.open[e.Bracket][e.Market] = e.Token
	case journal.EvAnswer:
		for m, tok := range s.open[e.Bracket] {
			if tok == e.Token || e.Token == "" {
				delete(s.open[e.Bracket], m)
			}
		}
		if len(s.open[e.Bracket]) == 0 {
			delete(s.open, e.Bracket)
		}
	case journal.EvForecast:
		s.forecast = e.After
	case journal.EvReplan:
		if a := s.asha; a != nil {
			s.replanASHA(e)
		} else if e.Bracket < len(s.plan) && e.Stage+len(e.Plan) == len(s.plan[e.Bracket]) {
			r := revision{bracket: e.Bracket, stage: e.Stage, at: e.At, event: e}
			for _, sa := range s.plan[e.Bracket][e.Stage:] {
				r.gpusBefore = append(r.gpusBefore, sa.GPUs)
			}
			copy(s.plan[e.Bracket][e.Stage:], e.Plan)
			s.revisions = append(s.revisions, r)
			s.forecast = e.After
		} else {
			fmt.Fprintf(s.log, "re-plan of bracket %d from stage %d: %d stages do not fit the plan\n", e.Bracket, e.Stage+1, len(e.Plan))
		}
	}
}

// replanASHA applies a revision of an ASHA run's schedule from the phase it is in (e.Stage) on:
// e.Plan's GPU counts replace the rest of the plan, its first a phase of its own when it holds
// other GPUs than the current one (entered next: enterNow). One of another phase (a journal of
// another plan) is skipped.
func (s *state) replanASHA(e journal.Event) {
	a := s.asha
	if e.Stage != len(a.phaseAt)-1 || len(e.Plan) == 0 {
		fmt.Fprintf(s.log, "journal: re-plan from phase %d in phase %d: skipped\n", e.Stage+1, len(a.phaseAt))
		return
	}
	r := revision{bracket: 0, stage: e.Stage, at: e.At, gpusBefore: slices.Clone(a.plan.GPUs[e.Stage:]), event: e}
	keep := e.Stage
	if e.Plan[0].GPUs != a.plan.GPUs[e.Stage] { // the count changes now: a phase begins
		keep++
		a.enterNow = keep
	}
	gpus := slices.Clone(a.plan.GPUs[:keep])
	for _, sa := range e.Plan {
		gpus = append(gpus, sa.GPUs)
	}
	a.plan = sim.ASHAPlan{GPUs: gpus}
	s.revisions = append(s.revisions, r)
	s.forecast = e.After
}

// promote applies an ASHA decision: trial e.Trial's job at rung e.Stage of bracket e.Bracket (its
// start at rung 0). A decision the ladder does not allow (a journal of another spec) is skipped.
func (s *state) promote(e journal.Event) {
	a := s.asha
	if a == nil {
		fmt.Fprintf(s.log, "journal: promote event in a run that is not ASHA: skipped\n")
		return
	}
	if err := a.ladder.Take(asha.Job{Trial: a.index[e.Trial], Bracket: e.Bracket, Rung: e.Stage}); err != nil {
		s.noteLadder(err)
		return
	}
	key := stageKey{e.Bracket, e.Stage}
	if w := s.stageAt[key]; w.start.IsZero() {
		s.stageAt[key] = window{start: e.At}
	}
	if e.Stage > 0 {
		s.move(s.trials[e.Trial], trial.Promote)
		from := stageKey{e.Bracket, e.Stage - 1}
		a.promoted[from] = append(a.promoted[from], e.Trial)
	}
}

func (s *state) noteLadder(err error) {
	if err != nil {
		fmt.Fprintf(s.log, "journal: %v: skipped\n", err)
	}
}

// observe takes the evidence of a report: the time since the trial's launch (start-up and the
// iterations up to this one) or since its previous report (iterations alone).
func (s *state) observe(t *trialRun, e journal.Event) {
	if t.seen.IsZero() || t.gpus == 0 || e.Iter <= t.seenIter || e.At.Before(t.seen) {
		return
	}
	key := evidenceKey{t.bracket, e.Stage, t.gpus}
	o := s.evidence[key]
	if o == nil {
		o = &observed{}
		s.evidence[key] = o
	}
	secs, n := e.At.Sub(t.seen).Seconds(), float64(e.Iter-t.seenIter)
	switch {
	case t.fresh && t.cold:
		o.coldSecs += secs
		o.coldIters += n
		o.coldLaunch++
	case t.fresh:
		o.firstSecs += secs
		o.firstIters += n
		o.launches++
	default:
		o.iterSecs += secs
		o.iters += n
	}
	t.seen, t.seenIter, t.fresh = e.At, e.Iter, false
}

// launched records a launch's span from a done or fail event, for per-function billing.
func (s *state) launched(e journal.Event) {
	if !e.Began.IsZero() && !e.Exited.IsZero() {
		s.launches = append(s.launches, launchSpan{bracket: e.Bracket, gpus: e.GPUs, start: e.Began, end: e.Exited})
	}
}

// move applies an event to a trial through the state machine; an impossible transition is a
// driver bug, logged rather than fatal.
func (s *state) move(t *trialRun, e trial.Event) {
	next, err := trial.Transition(t.state, e)
	if err != nil {
		fmt.Fprintf(s.log, "trial %s: %v\n", t.id, err)
		return
	}
	t.state = next
}

// settle applies a sync: kept trials are promoted (or, after the last stage, done), the others
// that took part in the stage cut.
func (s *state) settle(b, k int, keep []string) {
	kept := map[string]bool{}
	for _, id := range keep {
		kept[id] = true
	}
	last := k == len(s.brackets[b].Stages)-1
	for _, id := range s.order[b] {
		t := s.trials[id]
		if _, done := t.done[k]; !done || t.state == trial.Failed {
			continue
		}
		if kept[id] && !last {
			s.move(t, trial.Promote)
		} else {
			s.move(t, trial.Cut)
		}
	}
}

// dropNodes ends bracket b's nodes ids (used or draining): they bill until at.
func (s *state) dropNodes(b int, ids []string, at time.Time) {
	drop := map[string]bool{}
	for _, id := range ids {
		drop[id] = true
	}
	for _, list := range []*[]cloud.Node{&s.nodes[b], &s.draining[b]} {
		var keep []cloud.Node
		for _, n := range *list {
			if drop[n.ID] {
				s.released = append(s.released, nodeSpan{bracket: b, node: n, released: at})
			} else {
				keep = append(keep, n)
			}
		}
		*list = keep
	}
}

// drainNodes moves bracket b's nodes ids out of use: they bill on until released.
func (s *state) drainNodes(b int, ids []string) {
	var keep []cloud.Node
	for _, n := range s.nodes[b] {
		if slices.Contains(ids, n.ID) {
			s.draining[b] = append(s.draining[b], n)
		} else {
			keep = append(keep, n)
		}
	}
	s.nodes[b] = keep
}

// trialIndex is the index in the run of bracket b's trial i: brackets' trials numbered one
// after another.
func (s *state) trialIndex(b, i int) int {
	for _, br := range s.brackets[:b] {
		i += br.Trials()
	}
	return i
}

func (s *state) allTrials() []string {
	var ids []string
	for _, o := range s.order {
		ids = append(ids, o...)
	}
	return ids
}

// active is who takes part in bracket b's stage k: every trial at stage 0, then the survivors
// of the stage before.
func (s *state) active(b, k int) []string {
	if k == 0 {
		return append([]string(nil), s.order[b]...)
	}
	return s.synced[stageKey{b, k - 1}]
}

// pending is the trials of stage k that have neither finished it nor given up.
func (s *state) pending(b, k int) []string {
	var out []string
	for _, id := range s.active(b, k) {
		if _, done := s.trials[id].done[k]; !done && !s.trials[id].failed[k] {
			out = append(out, id)
		}
	}
	return out
}

// rank orders a stage's finished trials for the sync: those with the objective first, best
// first; ties and trials without it by ID, so that promotion is deterministic. Failed trials are
// left out.
func (s *state) rank(b, k int) []string {
	var ok []string
	for _, id := range s.active(b, k) {
		if _, done := s.trials[id].done[k]; done {
			ok = append(ok, id)
		}
	}
	sort.SliceStable(ok, func(i, j int) bool {
		mi, mj := s.trials[ok[i]].done[k], s.trials[ok[j]].done[k]
		switch {
		case math.IsNaN(mi) != math.IsNaN(mj):
			return !math.IsNaN(mi)
		case !math.IsNaN(mi) && mi != mj:
			return s.better(mi, mj)
		default:
			return ok[i] < ok[j]
		}
	})
	return ok
}

func (s *state) better(a, b float64) bool {
	if s.exp.Objective.Mode == "min" {
		return a < b
	}
	return a > b
}

// held is every node the run holds now, across brackets, draining ones too.
func (s *state) held() []cloud.Node {
	var out []cloud.Node
	for b, ns := range s.nodes {
		out = append(out, ns...)
		out = append(out, s.draining[b]...)
	}
	return out
}

func metricOrNaN(m *float64) float64 {
	if m == nil {
		return math.NaN()
	}
	return *m
}
