package runstate

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// State is what a run knows: a fold of its journal's events. Only Apply changes it, for the live
// run (journal the event, then apply it) and for a replay alike. The engine reads the fields it
// decides from (exported for it) and never writes them; readers use the views (Snapshot, Result
// and the package's functions).
type State struct {
	origin   Plan // what New was given: what a snapshot names the plan by
	exp      *spec.Experiment
	Brackets []spec.Bracket
	Model    *sim.Model // the spec's: prices, offers, node sizes
	// timeScale is wall seconds per spec second: what the views report times and costs in.
	timeScale float64
	log       io.Writer // impossible transitions are noted here: a driver bug, not fatal

	RunID       string
	Start       time.Time
	Trials      map[string]*trialRun
	Order       [][]string      // trial IDs per bracket, in sampling order
	Nodes       [][]cloud.Node  // per bracket, the nodes it holds and uses
	Draining    [][]cloud.Node  // per bracket, nodes being interrupted: held (billing), not used
	Known       map[string]bool // every node ever journaled
	released    []nodeSpan
	Synced      map[StageKey][]string // survivors of each synced stage
	StageAt     map[StageKey]window
	launches    []launchSpan
	Tries       map[TrialStage]int // launches journaled
	Fails       map[TrialStage]int // failed tries journaled: what retries are counted on
	timeouts    map[StageKey]int
	retries     map[StageKey]int
	Interrupts  map[TrialStage]int // tries ended by a lost node, per trial and stage
	lostTries   map[StageKey]int   // the same per stage, for the report
	interrupted []interruption     // spot nodes taken away, in order
	Finished    bool
	Cancelled   string            // why, once cancelled
	stopped     string            // why the last driver stopped short of the end; "" while one drives it
	stopCause   journal.StopCause // the same as a word
	LaunchLog   []LaunchRecord    // every launch, in journal order
	OpenLaunch  map[string]int    // trial -> its launch under way, in launchLog
	nodeLog     []NodeRecord      // every node, in the order it came up
	nodeAt      map[string]int    // node -> its record in nodeLog
	current     []int             // per bracket, the last stage that began
	counts      Counts
	Requests    map[int]int // node requests journaled per bracket
	// Open holds, per bracket and market asked ("": its stage's own; a hedged stage asks for its
	// on-demand nodes apart), the token of a request no answer was journaled for: the last one,
	// where requests overlap (a replacement asked for while another is out). A resumed driver
	// repeats that one; nodes an earlier one rented and no record names are released by
	// reconcile as nodes no bracket knows, journaled as billed until then.
	Open map[int]map[string]string
	// ODTier holds the nodes rented for a hedged stage's on-demand tier (node_up's Tier).
	ODTier    map[string]bool
	Plan      sim.Alloc // the plan run: the one the run began with, as revisions changed it
	revisions []revision
	Forecast  *planner.Forecast // the latest forecast of the whole run (EvForecast, EvReplan)
	evidence  map[EvidenceKey]*observed
	// waveEnded holds the stages a launch of has ended: later launches are not their first wave.
	waveEnded map[StageKey]bool
	ASHA      *ashaState // an ASHA run's; nil for stages
	// FirstEnds holds the first trials' ends of their first stage: the failure rule's evidence.
	FirstEnds firstEnds

	// Kept as events come, for readers that must not walk the whole run (tally.go).
	tallies     map[StageKey]*tally
	itersAll    int
	nodesGen    []uint64
	heldBy      map[string]heldNode // the nodes brackets use now (draining and released ones absent)
	spentClosed float64             // what released nodes and ended launches cost
	drawn       int                 // trials with a configuration
	results     int                 // trial-stages done or given up, of trials with a configuration
}

// OpenTokens are bracket b's requests no answer was journaled for, by market asked, in order.
func (s *State) OpenTokens(b int) []string {
	var out []string
	for _, m := range slices.Sorted(maps.Keys(s.Open[b])) {
		out = append(out, s.Open[b][m])
	}
	return out
}

// ashaState is what an ASHA run knows beyond what stages do: the promotion state, folded from its
// promote, done and fail events (the decisions journaled, so that a replay takes each once),
// its trials by their index in the ladder, and when each of its plan's phases began.
type ashaState struct {
	Plan    sim.ASHAPlan
	Ladder  *asha.Ladder
	ByIndex []string
	Index   map[string]int
	PhaseAt []time.Time
	// EnterNow is the phase a revision of the schedule begins at once (its GPUs differ from the
	// phase the run was in): phases are spans of one GPU count, so a revision that changes the
	// count now starts a phase of its own.
	EnterNow int
	rungEnd  map[StageKey]time.Time // the last result of each rung so far
	end      time.Time              // when it finished
	// promoted are the trials each rung promoted, in order.
	promoted map[StageKey][]string
}

// revision is a re-plan of bracket b from stage k on (journaled as EvReplan).
type revision struct {
	bracket, stage int
	at             time.Time
	gpusBefore     []int
	event          journal.Event
}

// EvidenceKey is where iterations were observed: a stage of a bracket, on trials of gpus GPUs.
type EvidenceKey struct{ Bracket, Stage, gpus int }

// observed is what a run saw of the model at one evidenceKey, in wall seconds: iterations
// between reports, and each launch's first report (start-up and firstIters iterations); those of
// the first wave of a job's first stage apart (cold: they carry the first-stage lag too).
type observed struct {
	iterSecs, iters                 float64
	firstSecs, firstIters, launches float64
	coldSecs, coldIters, coldLaunch float64
}

type StageKey struct{ Bracket, Stage int }

type TrialStage struct {
	Trial string
	Stage int
}

type window struct{ Start, end time.Time }

type trialRun struct {
	id      string
	bracket int
	pos     int // its place in its bracket's Order
	Params  spec.Config
	State   trial.State
	Done    map[int]float64 // stage -> objective metric (NaN when the trainer never reported it)
	metrics map[string]float64
	// cost is what its ended launches cost (launchCost); points its results for a
	// multi-objective spec, by stage (notePoint).
	cost   float64
	points map[int]Scored
	Iter   int
	Failed map[int]bool
	Nodes  []string // where its last launch ran
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

// New is the empty state of a run of p: its brackets (an ASHA job's: its rungs, every
// bracket's held at the first phase's GPUs on the default offer) and its model. A plan that
// does not fit the spec is an error.
func New(p Plan, log io.Writer) (*State, error) {
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
		st := newState(p.Experiment, brackets, p.Alloc, m, p.TimeScale, log)
		st.origin = p
		return st, nil
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
	st.ASHA = &ashaState{Plan: ap, Ladder: asha.New(*a), Index: map[string]int{}, rungEnd: map[StageKey]time.Time{}, promoted: map[StageKey][]string{}}
	st.origin = p
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

func newState(exp *spec.Experiment, brackets []spec.Bracket, plan sim.Alloc, model *sim.Model, timeScale float64, log io.Writer) *State {
	return &State{exp: exp, Brackets: brackets, Plan: plan.Clone(), Model: model, timeScale: timeScale, log: log, Trials: map[string]*trialRun{}, evidence: map[EvidenceKey]*observed{},
		Known: map[string]bool{},
		Order: make([][]string, len(brackets)), Nodes: make([][]cloud.Node, len(brackets)), Draining: make([][]cloud.Node, len(brackets)),
		Synced: map[StageKey][]string{}, StageAt: map[StageKey]window{}, Tries: map[TrialStage]int{},
		Fails: map[TrialStage]int{}, timeouts: map[StageKey]int{}, retries: map[StageKey]int{},
		Interrupts: map[TrialStage]int{}, lostTries: map[StageKey]int{}, waveEnded: map[StageKey]bool{},
		Requests: map[int]int{}, Open: map[int]map[string]string{}, ODTier: map[string]bool{}, OpenLaunch: map[string]int{}, nodeAt: map[string]int{},
		current: make([]int, len(brackets)), tallies: map[StageKey]*tally{}, nodesGen: make([]uint64, len(brackets)), heldBy: map[string]heldNode{}}
}

// Apply folds one event into the state. It is the only place that says what an event means.
func (s *State) Apply(e journal.Event) {
	key := StageKey{e.Bracket, e.Stage}
	if e.Bracket < 0 || e.Bracket >= len(s.Brackets) {
		fmt.Fprintf(s.log, "journal: %s event of bracket %d, which the spec does not have: skipped\n", e.Ev, e.Bracket)
		return
	}
	switch e.Ev {
	case journal.EvLaunch, journal.EvReport, journal.EvDone, journal.EvFail, journal.EvPromote:
		if s.Trials[e.Trial] == nil {
			fmt.Fprintf(s.log, "journal: %s event of trial %s, which was never sampled: skipped\n", e.Ev, e.Trial)
			return
		}
	}
	switch e.Ev {
	case journal.EvStart:
		s.Start, s.RunID = e.At, e.RunID
	case journal.EvTrial:
		s.Trials[e.Trial] = &trialRun{id: e.Trial, bracket: e.Bracket, pos: len(s.Order[e.Bracket]), Params: e.Params, State: trial.Pending,
			Done: map[int]float64{}, Failed: map[int]bool{}}
		if e.Params != nil {
			s.drawn++
		}
		s.Order[e.Bracket] = append(s.Order[e.Bracket], e.Trial)
		if a := s.ASHA; a != nil {
			a.Index[e.Trial] = len(a.ByIndex)
			a.ByIndex = append(a.ByIndex, e.Trial)
		}
	case journal.EvNodeUp:
		if i, ok := s.nodeAt[e.Node.ID]; !ok || s.nodeLog[i].Cause != "" { // new, or claimed again after its release
			s.nodeAt[e.Node.ID] = len(s.nodeLog)
			s.nodeLog = append(s.nodeLog, NodeRecord{Bracket: e.Bracket, Stage: s.current[e.Bracket], Node: *e.Node, Up: e.At})
		}
		s.Known[e.Node.ID] = true
		if e.Tier == spec.MarketOnDemand {
			s.ODTier[e.Node.ID] = true
		}
		s.Nodes[e.Bracket] = append(s.Nodes[e.Bracket], *e.Node)
		s.heldBy[e.Node.ID] = heldNode{e.Bracket, *e.Node}
		s.nodesGen[e.Bracket]++
	case journal.EvNodeOff:
		if journal.NodeCause(e.Cause) == journal.NodeLost {
			s.counts.NodesLost += len(e.Nodes)
		}
		s.endNodes(e.Nodes, e.At, journal.NodeCause(e.Cause), false)
		s.dropNodes(e.Bracket, e.Nodes, e.At)
	case journal.EvInterrupt:
		s.counts.NodesLost += len(e.Nodes)
		s.counts.Interruptions += len(e.Nodes)
		s.endNodes(e.Nodes, e.At, journal.NodeTaken, e.Draining)
		if e.Draining {
			s.drainNodes(e.Bracket, e.Nodes)
		} else {
			s.dropNodes(e.Bracket, e.Nodes, e.At)
		}
		s.interrupted = append(s.interrupted, interruption{bracket: e.Bracket, nodes: e.Nodes, at: e.At, why: e.Error})
	case journal.EvStage:
		s.current[e.Bracket] = e.Stage
		if w := s.StageAt[key]; w.Start.IsZero() {
			s.StageAt[key] = window{Start: e.At}
		}
	case journal.EvLaunch:
		s.closeLaunch(e.Trial, e.At, LaunchOrphaned) // a launch with no end journaled: its driver died
		s.OpenLaunch[e.Trial] = len(s.LaunchLog)
		s.tallyOf(key).running++
		s.LaunchLog = append(s.LaunchLog, LaunchRecord{Bracket: e.Bracket, Stage: e.Stage, Trial: e.Trial, Try: e.Try, GPUs: e.GPUs,
			Nodes: e.Nodes, Start: e.At})
		ts := TrialStage{e.Trial, e.Stage}
		s.Tries[ts] = max(s.Tries[ts], e.Try)
		t := s.Trials[e.Trial]
		if t.Params == nil && e.Params != nil { // drawn at its first launch (an adaptive sampler)
			t.Params = e.Params
			s.drawn++
		}
		t.Nodes = e.Nodes
		t.seen, t.seenIter, t.gpus, t.fresh = e.At, t.Iter, e.GPUs, true
		t.cold = e.Stage == 0 && s.Brackets[e.Bracket].Round == 0 && !s.waveEnded[key]
		s.move(t, trial.Launch)
	case journal.EvReport:
		t := s.Trials[e.Trial]
		s.observe(t, e)
		t.metrics = e.Metrics
		s.setIter(t, e.Iter)
	case journal.EvDone:
		s.counts.Done++
		s.closeLaunch(e.Trial, e.At, LaunchDone)
		t := s.Trials[e.Trial]
		if e.Stage == 0 {
			s.FirstEnds.note(e.Trial, "", "")
		}
		s.noteResult(t, e.Stage)
		t.Done[e.Stage] = metricOrNaN(e.Metric)
		t.metrics = e.Metrics
		s.notePoint(t, e.Stage, e.Metrics)
		s.setIter(t, e.Iter)
		s.move(t, trial.Reached)
		s.launched(e)
		s.waveEnded[key] = true
		if a := s.ASHA; a != nil {
			if p, ok := t.points[e.Stage]; ok {
				s.noteLadder(a.Ladder.ReportPoint(a.Index[e.Trial], p.Point))
			} else {
				s.noteLadder(a.Ladder.Report(a.Index[e.Trial], search.Loss(t.Done[e.Stage], s.exp.Objective.Mode)))
			}
			a.rungEnd[key] = e.At
		}
	case journal.EvFail:
		t := s.Trials[e.Trial]
		if e.Stage == 0 {
			kind := "" // a lost node, a gang not started, a trainer that reported: nothing of a broken start
			if !e.Interrupted && !e.NotStarted && t.Iter == 0 {
				kind = failureKind(e.Error, e.Trial)
			}
			s.FirstEnds.note(e.Trial, kind, e.Error)
		}
		switch {
		case e.GaveUp:
			s.counts.GaveUp++
			s.closeLaunch(e.Trial, e.At, LaunchGaveUp)
			if !t.Failed[e.Stage] {
				s.tallyOf(StageKey{t.bracket, e.Stage}).failed++
				s.noteResult(t, e.Stage)
			}
			t.Failed[e.Stage] = true
			s.move(t, trial.GaveUp)
			if a := s.ASHA; a != nil {
				s.noteLadder(a.Ladder.Drop(a.Index[e.Trial]))
			}
		case e.Interrupted:
			s.counts.InterruptedTries++
			s.closeLaunch(e.Trial, e.At, LaunchInterrupted)
			s.Interrupts[TrialStage{e.Trial, e.Stage}]++
			s.lostTries[key]++
			s.move(t, trial.Interrupted)
		default:
			s.counts.Retries++
			s.closeLaunch(e.Trial, e.At, LaunchFailed)
			s.retries[key]++
			s.Fails[TrialStage{e.Trial, e.Stage}]++
			s.move(t, trial.Crashed)
		}
		s.launched(e)
		s.waveEnded[key] = true
	case journal.EvTimeout:
		s.counts.Timeouts++
		s.timeouts[key]++
	case journal.EvSync:
		s.settle(e.Bracket, e.Stage, e.Keep)
		s.Synced[key] = e.Keep
		w := s.StageAt[key]
		w.end = e.At
		s.StageAt[key] = w
	case journal.EvResume:
		for _, t := range slices.Sorted(maps.Keys(s.OpenLaunch)) {
			s.closeLaunch(t, e.At, LaunchOrphaned)
		}
		// A driver took over (a cancelled run only with --force: it is no longer cancelled). The
		// previous driver's gangs were ended before this event: their trials wait again.
		s.Cancelled, s.stopped, s.stopCause = "", "", ""
		for _, id := range s.allTrials() {
			if t := s.Trials[id]; t.State == trial.Running {
				s.move(t, trial.Interrupted)
			}
		}
	case journal.EvCancel:
		s.Cancelled = e.Error
		if s.Cancelled == "" {
			s.Cancelled = "cancelled"
		}
	case journal.EvFinish:
		s.Finished = true
		if s.ASHA != nil { // the trials ASHA never promoted are over
			s.ASHA.end = e.At
			for _, id := range s.allTrials() {
				if t := s.Trials[id]; t.State == trial.Paused {
					s.move(t, trial.Cut)
				}
			}
		}
	case journal.EvPromote:
		s.promote(e)
	case journal.EvPhase:
		if a := s.ASHA; a != nil && e.Phase == len(a.PhaseAt) && e.Phase < len(a.Plan.GPUs) {
			a.PhaseAt = append(a.PhaseAt, e.At)
		} else {
			fmt.Fprintf(s.log, "journal: phase %d does not follow the phases so far: skipped\n", e.Phase+1)
		}
	case journal.EvStop:
		s.stopped = e.Error
		s.stopCause = journal.StopCause(e.Cause)
	case journal.EvRequest:
		s.Requests[e.Bracket]++
		if s.Open[e.Bracket] == nil {
			s.Open[e.Bracket] = map[string]string{}
		}
		s.Open[e.Bracket][e.Market] = e.Token
	case journal.EvAnswer:
		for m, tok := range s.Open[e.Bracket] {
			if tok == e.Token || e.Token == "" {
				delete(s.Open[e.Bracket], m)
			}
		}
		if len(s.Open[e.Bracket]) == 0 {
			delete(s.Open, e.Bracket)
		}
	case journal.EvForecast:
		s.Forecast = e.After
	case journal.EvReplan:
		if a := s.ASHA; a != nil {
			s.replanASHA(e)
		} else if e.Bracket < len(s.Plan) && e.Stage+len(e.Plan) == len(s.Plan[e.Bracket]) {
			r := revision{bracket: e.Bracket, stage: e.Stage, at: e.At, event: e}
			for _, sa := range s.Plan[e.Bracket][e.Stage:] {
				r.gpusBefore = append(r.gpusBefore, sa.GPUs)
			}
			copy(s.Plan[e.Bracket][e.Stage:], e.Plan)
			s.revisions = append(s.revisions, r)
			s.Forecast = e.After
		} else {
			fmt.Fprintf(s.log, "re-plan of bracket %d from stage %d: %d stages do not fit the plan\n", e.Bracket, e.Stage+1, len(e.Plan))
		}
	}
}

// replanASHA applies a revision of an ASHA run's schedule from the phase it is in (e.Stage) on:
// e.Plan's GPU counts replace the rest of the plan, its first a phase of its own when it holds
// other GPUs than the current one (entered next: enterNow). One of another phase (a journal of
// another plan) is skipped.
func (s *State) replanASHA(e journal.Event) {
	a := s.ASHA
	if e.Stage != len(a.PhaseAt)-1 || len(e.Plan) == 0 {
		fmt.Fprintf(s.log, "journal: re-plan from phase %d in phase %d: skipped\n", e.Stage+1, len(a.PhaseAt))
		return
	}
	r := revision{bracket: 0, stage: e.Stage, at: e.At, gpusBefore: slices.Clone(a.Plan.GPUs[e.Stage:]), event: e}
	keep := e.Stage
	if e.Plan[0].GPUs != a.Plan.GPUs[e.Stage] { // the count changes now: a phase begins
		keep++
		a.EnterNow = keep
	}
	gpus := slices.Clone(a.Plan.GPUs[:keep])
	for _, sa := range e.Plan {
		gpus = append(gpus, sa.GPUs)
	}
	a.Plan = sim.ASHAPlan{GPUs: gpus}
	s.revisions = append(s.revisions, r)
	s.Forecast = e.After
}

// promote applies an ASHA decision: trial e.Trial's job at rung e.Stage of bracket e.Bracket (its
// start at rung 0). A decision the ladder does not allow (a journal of another spec) is skipped.
func (s *State) promote(e journal.Event) {
	a := s.ASHA
	if a == nil {
		fmt.Fprintf(s.log, "journal: promote event in a run that is not ASHA: skipped\n")
		return
	}
	if err := a.Ladder.Take(asha.Job{Trial: a.Index[e.Trial], Bracket: e.Bracket, Rung: e.Stage}); err != nil {
		s.noteLadder(err)
		return
	}
	key := StageKey{e.Bracket, e.Stage}
	if w := s.StageAt[key]; w.Start.IsZero() {
		s.StageAt[key] = window{Start: e.At}
	}
	if e.Stage > 0 {
		s.move(s.Trials[e.Trial], trial.Promote)
		from := StageKey{e.Bracket, e.Stage - 1}
		a.promoted[from] = append(a.promoted[from], e.Trial)
	}
}

func (s *State) noteLadder(err error) {
	if err != nil {
		fmt.Fprintf(s.log, "journal: %v: skipped\n", err)
	}
}

// observe takes the evidence of a report: the time since the trial's launch (start-up and the
// iterations up to this one) or since its previous report (iterations alone).
func (s *State) observe(t *trialRun, e journal.Event) {
	if t.seen.IsZero() || t.gpus == 0 || e.Iter <= t.seenIter || e.At.Before(t.seen) {
		return
	}
	key := EvidenceKey{t.bracket, e.Stage, t.gpus}
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
func (s *State) launched(e journal.Event) {
	if !e.Began.IsZero() && !e.Exited.IsZero() {
		l := launchSpan{bracket: e.Bracket, gpus: e.GPUs, start: e.Began, end: e.Exited}
		s.launches = append(s.launches, l)
		s.spentClosed += s.launchCharge(l)
	}
}

// move applies an event to a trial through the state machine; an impossible transition is a
// driver bug, logged rather than fatal.
func (s *State) move(t *trialRun, e trial.Event) {
	next, err := trial.Transition(t.State, e)
	if err != nil {
		fmt.Fprintf(s.log, "trial %s: %v\n", t.id, err)
		return
	}
	t.State = next
}

// settle applies a sync: kept trials are promoted (or, after the last stage, done), the others
// that took part in the stage cut.
func (s *State) settle(b, k int, keep []string) {
	kept := map[string]bool{}
	for _, id := range keep {
		kept[id] = true
	}
	last := k == len(s.Brackets[b].Stages)-1
	for _, id := range s.Order[b] {
		t := s.Trials[id]
		if _, done := t.Done[k]; !done || t.State == trial.Failed {
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
func (s *State) dropNodes(b int, ids []string, at time.Time) {
	drop := map[string]bool{}
	for _, id := range ids {
		drop[id] = true
	}
	s.nodesGen[b]++
	for _, list := range []*[]cloud.Node{&s.Nodes[b], &s.Draining[b]} {
		var keep []cloud.Node
		for _, n := range *list {
			if drop[n.ID] {
				s.released = append(s.released, nodeSpan{bracket: b, node: n, released: at})
				s.spentClosed += s.nodeCharge(n, s.sec(at))
				delete(s.heldBy, n.ID)
			} else {
				keep = append(keep, n)
			}
		}
		*list = keep
	}
}

// drainNodes moves bracket b's nodes ids out of use: they bill on until released.
func (s *State) drainNodes(b int, ids []string) {
	s.nodesGen[b]++
	var keep []cloud.Node
	for _, n := range s.Nodes[b] {
		if slices.Contains(ids, n.ID) {
			delete(s.heldBy, n.ID)
			s.Draining[b] = append(s.Draining[b], n)
		} else {
			keep = append(keep, n)
		}
	}
	s.Nodes[b] = keep
}

// TrialIndex is the index in the run of bracket b's trial i: brackets' trials numbered one
// after another.
func (s *State) TrialIndex(b, i int) int {
	for _, br := range s.Brackets[:b] {
		i += br.Trials()
	}
	return i
}

func (s *State) allTrials() []string {
	var ids []string
	for _, o := range s.Order {
		ids = append(ids, o...)
	}
	return ids
}

// Active is who takes part in bracket b's stage k: every trial at stage 0, then the survivors
// of the stage before.
func (s *State) Active(b, k int) []string {
	if k == 0 {
		return append([]string(nil), s.Order[b]...)
	}
	return s.Synced[StageKey{b, k - 1}]
}

// Pending is the trials of stage k that have neither finished it nor given up.
func (s *State) Pending(b, k int) []string {
	var out []string
	for _, id := range s.Active(b, k) {
		if _, done := s.Trials[id].Done[k]; !done && !s.Trials[id].Failed[k] {
			out = append(out, id)
		}
	}
	return out
}

// Rank orders a stage's finished trials for the sync: those with the objective first, best
// first; ties and trials without it by ID, so that promotion is deterministic. Failed trials are
// left out.
func (s *State) Rank(b, k int) []string {
	var ok []string
	for _, id := range s.Active(b, k) {
		if _, done := s.Trials[id].Done[k]; done {
			ok = append(ok, id)
		}
	}
	if s.exp.MultiObjective() {
		return s.rankPoints(ok, k)
	}
	sort.SliceStable(ok, func(i, j int) bool {
		mi, mj := s.Trials[ok[i]].Done[k], s.Trials[ok[j]].Done[k]
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

// rankPoints orders a multi-objective spec's trials with results at stage k by pareto.Order
// (orderPoints), ties by trial ID.
func (s *State) rankPoints(trials []string, k int) []string {
	slices.Sort(trials)
	results := make([]TrialStage, len(trials))
	for i, id := range trials {
		results[i] = TrialStage{Trial: id, Stage: k}
	}
	out := make([]string, 0, len(trials))
	for _, r := range s.orderPoints(results) {
		out = append(out, r.Trial)
	}
	return out
}

func (s *State) better(a, b float64) bool {
	if s.exp.Objective.Mode == "min" {
		return a < b
	}
	return a > b
}

// Held is every node the run holds now, across brackets, draining ones too.
func (s *State) Held() []cloud.Node {
	var out []cloud.Node
	for b, ns := range s.Nodes {
		out = append(out, ns...)
		out = append(out, s.Draining[b]...)
	}
	return out
}

func metricOrNaN(m *float64) float64 {
	if m == nil {
		return math.NaN()
	}
	return *m
}
