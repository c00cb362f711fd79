package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// ErrStopped is what Handle.Wait returns for a gang stopped on purpose.
var ErrStopped = errors.New("gang stopped")

// Config is one run: the experiment, its plan, and the adapters that do the work.
type Config struct {
	Experiment *spec.Experiment
	Alloc      sim.Alloc
	Provider   cloud.Provider
	Runtime    Runtime
	Journal    *Journal
	// Past holds the journal of an earlier driver of this run; Run resumes from it.
	Past []Event
	// TimeScale is wall seconds per spec second: 1 for real trainers, less when the local
	// provider and the synthetic trainer compress time for tests. Realized times and costs are
	// reported in spec seconds.
	TimeScale float64
	// MaxRetries bounds how often a failed trial is relaunched in one stage (default 2).
	MaxRetries int
	// Progress, when set, is told of every finished trial and stage.
	Progress func(Status)
	// Log receives what the run notices and carries on from (nil: discarded).
	Log io.Writer
}

// Status is a progress snapshot of one bracket's current stage.
type Status struct {
	Bracket       string
	Stage, Stages int
	Done, Total   int
	Failed        int
	Elapsed       time.Duration // spec time since the run started
	Cost          float64       // dollars so far
}

// run is the driver's state. Bracket goroutines share it under mu.
type run struct {
	cfg      Config
	exp      *spec.Experiment
	model    *sim.Model
	brackets []spec.Bracket
	mu       sync.Mutex
	start    time.Time
	trials   map[string]*trialRun
	order    [][]string // trial IDs per bracket, in sampling order
	nodes    [][]cloud.Node
	released []nodeSpan
	synced   map[[2]int][]string // (bracket, stage) -> trials kept
	stageAt  map[[2]int][2]time.Time
	launches []launchSpan
	log      io.Writer
}

type trialRun struct {
	id      string
	bracket int
	params  spec.Config
	state   trial.State
	done    map[int]float64 // stage -> objective metric (NaN when the trainer never reported it)
	metrics map[string]float64
	iter    int
	failed  map[int]bool
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

// Run executes the plan, or resumes it from cfg.Past, and returns what was realized.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	m, err := sim.NewModel(cfg.Experiment)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	brackets := cfg.Experiment.Algorithm.Brackets()
	if err := m.Check(brackets, cfg.Alloc); err != nil {
		return nil, fmt.Errorf("run: plan does not fit the spec: %w", err)
	}
	x := newRun(cfg, m, brackets)
	finished := x.replay(cfg.Past)
	if finished {
		return x.result(), nil
	}
	if x.start.IsZero() {
		x.start = time.Now()
		if err := x.journal(Event{Ev: EvStart, At: x.start}); err != nil {
			return nil, err
		}
		if err := x.sample(); err != nil {
			return nil, err
		}
	}
	if reaper, ok := cfg.Runtime.(Reaper); ok && len(cfg.Past) > 0 {
		if err := reaper.Reap(ctx); err != nil {
			return nil, fmt.Errorf("run: end the previous driver's gangs: %w", err)
		}
	}
	if err := x.reconcile(ctx); err != nil {
		return nil, err
	}
	errs := make([]error, len(brackets))
	var wg sync.WaitGroup
	for b := range brackets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[b] = x.runBracket(ctx, b)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return x.result(), err
	}
	if err := x.journal(Event{Ev: EvFinish}); err != nil {
		return nil, err
	}
	return x.result(), nil
}

func newRun(cfg Config, m *sim.Model, brackets []spec.Bracket) *run {
	return &run{cfg: cfg, exp: cfg.Experiment, model: m, brackets: brackets, trials: map[string]*trialRun{},
		order: make([][]string, len(brackets)), nodes: make([][]cloud.Node, len(brackets)),
		synced: map[[2]int][]string{}, stageAt: map[[2]int][2]time.Time{}, log: cfg.Log}
}

func (x *run) journal(e Event) error {
	if err := x.cfg.Journal.Append(e); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

// sample draws every bracket's configurations from the experiment's seed and journals them.
func (x *run) sample() error {
	for b, br := range x.brackets {
		r := spec.NewRand(x.exp.Seed, uint64(b))
		for i, params := range spec.SampleConfigs(x.exp.SearchSpace, br.Trials(), r) {
			id := fmt.Sprintf("b%d-t%04d", b, i)
			x.addTrial(id, b, params)
			if err := x.cfg.Journal.Note(Event{Ev: EvTrial, Bracket: b, Trial: id, Params: params}); err != nil {
				return fmt.Errorf("run: %w", err)
			}
		}
	}
	return x.cfg.Journal.Sync() // one sync for all of them
}

func (x *run) addTrial(id string, b int, params spec.Config) {
	x.trials[id] = &trialRun{id: id, bracket: b, params: params, state: trial.Pending, done: map[int]float64{}, failed: map[int]bool{}}
	x.order[b] = append(x.order[b], id)
}

// replay rebuilds the state an earlier driver journaled; it reports whether the run finished.
func (x *run) replay(events []Event) bool {
	for _, e := range events {
		key := [2]int{e.Bracket, e.Stage}
		switch e.Ev {
		case EvStart:
			x.start = e.At
		case EvTrial:
			x.addTrial(e.Trial, e.Bracket, e.Params)
		case EvNodeUp:
			x.nodes[e.Bracket] = append(x.nodes[e.Bracket], *e.Node)
		case EvNodeOff:
			x.dropNodes(e.Bracket, e.Nodes, e.At)
		case EvStage:
			at := x.stageAt[key]
			if at[0].IsZero() {
				at[0] = e.At
			}
			x.stageAt[key] = at
		case EvDone:
			t := x.trials[e.Trial]
			t.done[e.Stage] = metricOrNaN(e.Metric)
			t.metrics, t.iter = e.Metrics, e.Iter
			t.state = trial.Paused
		case EvReport:
			t := x.trials[e.Trial]
			t.metrics, t.iter = e.Metrics, e.Iter
		case EvFail:
			if e.Error == "gave up" {
				x.trials[e.Trial].failed[e.Stage] = true
				x.trials[e.Trial].state = trial.Failed
			}
		case EvSync:
			var active []string
			for _, id := range x.order[e.Bracket] {
				if _, ok := x.trials[id].done[e.Stage]; ok || x.trials[id].failed[e.Stage] {
					active = append(active, id)
				}
			}
			x.settle(e.Bracket, e.Stage, active, e.Keep)
			x.synced[key] = e.Keep
			at := x.stageAt[key]
			at[1] = e.At
			x.stageAt[key] = at
		case EvFinish:
			return true
		}
	}
	return false
}

// move applies an event to a trial's state through the state machine; an impossible transition
// is a driver bug, logged rather than fatal. Callers hold x.mu.
func (x *run) move(t *trialRun, e trial.Event) {
	next, err := trial.Transition(t.state, e)
	if err != nil {
		fmt.Fprintf(x.log, "trial %s: %v\n", t.id, err)
		return
	}
	t.state = next
}

// settle applies a sync: kept trials are promoted (or, after the last stage, done), the others
// cut. Callers hold x.mu.
func (x *run) settle(b, k int, active, keep []string) {
	kept := map[string]bool{}
	for _, id := range keep {
		kept[id] = true
	}
	last := k == len(x.brackets[b].Stages)-1
	for _, id := range active {
		t := x.trials[id]
		if t.state == trial.Failed {
			continue
		}
		if kept[id] && !last {
			x.move(t, trial.Promote)
		} else {
			x.move(t, trial.Cut)
		}
	}
}

func metricOrNaN(m *float64) float64 {
	if m == nil {
		return math.NaN()
	}
	return *m
}

// reconcile makes the nodes the journal says are held agree with what the provider holds:
// nodes the provider lost are forgotten, nodes it holds that no bracket knows are released.
func (x *run) reconcile(ctx context.Context) error {
	held, err := x.cfg.Provider.List(ctx)
	if err != nil {
		return fmt.Errorf("run: list nodes: %w", err)
	}
	have := map[string]bool{}
	for _, n := range held {
		have[n.ID] = true
	}
	known := map[string]bool{}
	for b := range x.nodes {
		var keep []cloud.Node
		var lost []string
		for _, n := range x.nodes[b] {
			if have[n.ID] {
				keep = append(keep, n)
				known[n.ID] = true
			} else {
				lost = append(lost, n.ID)
			}
		}
		if len(lost) > 0 {
			x.dropNodes(b, lost, time.Now())
			fmt.Fprintf(x.log, "resume: the provider no longer holds %v\n", lost)
			if err := x.journal(Event{Ev: EvNodeOff, Bracket: b, Nodes: lost}); err != nil {
				return err
			}
		}
	}
	var orphans []string
	for _, n := range held {
		if !known[n.ID] {
			orphans = append(orphans, n.ID)
		}
	}
	if len(orphans) > 0 {
		fmt.Fprintf(x.log, "resume: releasing nodes no bracket knows: %v\n", orphans)
		if err := x.cfg.Provider.Delete(ctx, orphans); err != nil {
			return fmt.Errorf("run: release orphans: %w", err)
		}
	}
	return nil
}

// heal forgets bracket b's nodes the provider no longer holds and rents replacements up to want.
// It reports whether the bracket's nodes changed.
func (x *run) heal(ctx context.Context, b, want int) (bool, error) {
	held, err := x.cfg.Provider.List(ctx)
	if err != nil {
		return false, fmt.Errorf("run: list nodes: %w", err)
	}
	alive := map[string]bool{}
	for _, n := range held {
		alive[n.ID] = true
	}
	x.mu.Lock()
	var lost []string
	for _, n := range x.nodes[b] {
		if !alive[n.ID] {
			lost = append(lost, n.ID)
		}
	}
	now := time.Now()
	x.dropNodes(b, lost, now)
	have := len(x.nodes[b])
	x.mu.Unlock()
	if len(lost) == 0 {
		return false, nil
	}
	fmt.Fprintf(x.log, "nodes lost: %v; replacing them\n", lost)
	if err := x.journal(Event{Ev: EvNodeOff, At: now, Bracket: b, Nodes: lost, Error: "lost"}); err != nil {
		return true, err
	}
	x.cfg.Provider.Delete(ctx, lost) // release what is left of them (billing stops)
	if have < want {
		if _, err := x.scaleTo(ctx, b, want, nil); err != nil {
			return true, err
		}
	}
	return true, nil
}

func (x *run) dropNodes(b int, ids []string, at time.Time) {
	drop := map[string]bool{}
	for _, id := range ids {
		drop[id] = true
	}
	var keep []cloud.Node
	for _, n := range x.nodes[b] {
		if drop[n.ID] {
			x.released = append(x.released, nodeSpan{bracket: b, node: n, released: at})
		} else {
			keep = append(keep, n)
		}
	}
	x.nodes[b] = keep
}

// runBracket runs one bracket's stages from the first one not yet synced.
func (x *run) runBracket(ctx context.Context, b int) error {
	br := x.brackets[b]
	active := append([]string(nil), x.order[b]...)
	var last placement.Placement
	for k, st := range br.Stages {
		if keep, ok := x.synced[[2]int{b, k}]; ok {
			active = keep
			continue
		}
		x.mu.Lock()
		if at := x.stageAt[[2]int{b, k}]; at[0].IsZero() {
			x.stageAt[[2]int{b, k}] = [2]time.Time{time.Now(), {}}
		}
		x.mu.Unlock()
		if err := x.journal(Event{Ev: EvStage, Bracket: b, Stage: k, GPUs: x.cfg.Alloc[b][k].GPUs}); err != nil {
			return err
		}
		var err error
		if last, err = x.scaleTo(ctx, b, x.cfg.Alloc[b][k].Nodes, last); err != nil {
			return err
		}
		if last, err = x.runStage(ctx, b, k, st, active, last); err != nil {
			return err
		}
		keep := x.rank(b, k, active)
		if len(keep) == 0 && len(active) > 0 {
			return fmt.Errorf("run: bracket %d stage %d: every trial failed (their logs say why)", b, k)
		}
		if k+1 < len(br.Stages) {
			keep = keep[:min(len(keep), br.Stages[k+1].Trials)]
		}
		now := time.Now()
		x.mu.Lock()
		x.settle(b, k, active, keep)
		x.synced[[2]int{b, k}] = keep
		at := x.stageAt[[2]int{b, k}]
		x.stageAt[[2]int{b, k}] = [2]time.Time{at[0], now}
		x.mu.Unlock()
		if err := x.journal(Event{Ev: EvSync, At: now, Bracket: b, Stage: k, Keep: keep}); err != nil {
			return err
		}
		active = keep
	}
	_, err := x.scaleTo(ctx, b, 0, nil)
	return err
}

// rank orders a stage's trials for the sync: those with the objective first, best first; ties
// and trials without it by ID, so that promotion is deterministic. Failed trials are left out.
func (x *run) rank(b, k int, active []string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var ok []string
	for _, id := range active {
		if _, done := x.trials[id].done[k]; done {
			ok = append(ok, id)
		}
	}
	better := func(a, c float64) bool {
		if x.exp.Objective.Mode == "min" {
			return a < c
		}
		return a > c
	}
	sort.SliceStable(ok, func(i, j int) bool {
		mi, mj := x.trials[ok[i]].done[k], x.trials[ok[j]].done[k]
		switch {
		case math.IsNaN(mi) != math.IsNaN(mj):
			return !math.IsNaN(mi)
		case !math.IsNaN(mi) && mi != mj:
			return better(mi, mj)
		default:
			return ok[i] < ok[j]
		}
	})
	return ok
}

// scaleTo brings bracket b to n nodes: the least used nodes under the last placement are released
// first (bin-packing before scale-down); new ones are created in one request.
func (x *run) scaleTo(ctx context.Context, b, n int, last placement.Placement) (placement.Placement, error) {
	x.mu.Lock()
	held := append([]cloud.Node(nil), x.nodes[b]...)
	x.mu.Unlock()
	if len(held) > n {
		release := placement.Release(toPlacementNodes(held), n, last)
		now := time.Now() // billing stops when the release is asked for, not when the node is gone
		if err := x.cfg.Provider.Delete(ctx, release); err != nil {
			return last, fmt.Errorf("run: release nodes: %w", err)
		}
		x.mu.Lock()
		x.dropNodes(b, release, now)
		x.mu.Unlock()
		if err := x.journal(Event{Ev: EvNodeOff, At: now, Bracket: b, Nodes: release}); err != nil {
			return last, err
		}
		gone := map[string]bool{}
		for _, id := range release {
			gone[id] = true
		}
		for t, slots := range last {
			for _, s := range slots {
				if gone[s.Node] {
					delete(last, t)
				}
			}
		}
	}
	if len(held) < n {
		created, err := x.cfg.Provider.Create(ctx, n-len(held))
		for i := range created {
			x.mu.Lock()
			x.nodes[b] = append(x.nodes[b], created[i])
			x.mu.Unlock()
			if jerr := x.journal(Event{Ev: EvNodeUp, At: created[i].RunningAt, Bracket: b, Node: &created[i]}); jerr != nil {
				return last, jerr
			}
		}
		if err != nil {
			return last, fmt.Errorf("run: create nodes: %w", err)
		}
	}
	return last, nil
}

func toPlacementNodes(nodes []cloud.Node) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = placement.Node{ID: n.ID, GPUs: n.GPUs}
	}
	return out
}

// outcome is a message about one launch: started (handle), exited (its GPUs are free), or
// final (err nil when it reached the target; also sent alone when the launch itself failed).
type outcome struct {
	trial   string
	started Handle
	exited  bool
	err     error
	metrics map[string]float64
	iter    int
	start   time.Time
	gpus    int
}

// runStage runs every active trial of stage k that has not finished it: as many gangs at once as
// the stage's GPUs allow, each placed with its GPUs together, a failed one relaunched from its
// checkpoint while retries last. The loop decides; launching and following a gang happen in its
// own goroutine, so that one gang's I/O never delays the next one's start. It returns the
// stage's placement.
func (x *run) runStage(ctx context.Context, b, k int, st spec.Stage, active []string, last placement.Placement) (placement.Placement, error) {
	alloc := x.cfg.Alloc[b][k]
	gpt := sim.GPUsPerTrial(st, alloc)
	parallel := max(1, alloc.GPUs/gpt)
	var queue []string
	x.mu.Lock()
	for _, id := range active {
		if _, done := x.trials[id].done[k]; !done && !x.trials[id].failed[k] {
			queue = append(queue, id)
		}
	}
	nodes := toPlacementNodes(x.nodes[b])
	byID := map[string]cloud.Node{}
	for _, n := range x.nodes[b] {
		byID[n.ID] = n
	}
	x.mu.Unlock()
	if last == nil {
		last = placement.Placement{}
	}
	occupied := map[string]bool{}  // gangs holding GPUs: launching or running
	handles := map[string]Handle{} // started gangs, to stop on cancellation
	inflight := 0                  // gangs whose final message is still to come
	tries := map[string]int{}
	results := make(chan outcome)
	doneCount := len(active) - len(queue)
	cancelled := false
	for len(queue) > 0 || inflight > 0 {
		for !cancelled && len(queue) > 0 && len(occupied) < parallel {
			id := queue[0]
			reqs := []placement.Request{{Trial: id, GPUs: gpt}}
			for r := range occupied {
				reqs = append(reqs, placement.Request{Trial: r, GPUs: gpt})
			}
			p, unplaced := placement.PlacePinned(nodes, reqs, last, occupied)
			if len(unplaced) > 0 {
				break // wait for a gang to finish
			}
			for t, s := range p {
				last[t] = s
			}
			queue = queue[1:]
			tries[id]++
			occupied[id] = true
			inflight++
			go x.launchAndFollow(ctx, b, k, st, id, p[id], byID, tries[id], gpt, results)
		}
		if inflight == 0 {
			if len(queue) > 0 && !cancelled {
				return last, fmt.Errorf("run: bracket %d stage %d: a gang of %d GPUs does not fit on %d nodes", b, k, gpt, len(nodes))
			}
			break
		}
		var o outcome
		select {
		case <-ctx.Done():
			if !cancelled {
				cancelled = true
				for _, h := range handles {
					h.Stop()
				}
			}
			o = <-results
		case o = <-results:
		}
		switch {
		case o.started != nil:
			handles[o.trial] = o.started
			if cancelled {
				o.started.Stop()
			}
			continue
		case o.exited:
			delete(occupied, o.trial)
			delete(handles, o.trial)
			x.mu.Lock()
			x.launches = append(x.launches, launchSpan{bracket: b, gpus: o.gpus, start: o.start, end: time.Now()})
			x.mu.Unlock()
			continue
		}
		inflight--
		delete(occupied, o.trial) // a launch that failed never sent exited
		delete(handles, o.trial)
		if cancelled {
			continue
		}
		if o.err == nil && o.iter < st.EndIter() {
			// Exit 0 means the target was reached; short of it the gang was interrupted (a stop,
			// a trainer that exits 0 on SIGTERM): relaunch it from its checkpoint.
			o.err = fmt.Errorf("exited 0 at iteration %d, short of the target %d: interrupted, not done", o.iter, st.EndIter())
		}
		if o.err != nil {
			if x.failed(b, k, o.trial, tries[o.trial], o.err) {
				queue = append(queue, o.trial)
			}
			// A gang may have failed because its node is gone: replace lost nodes before relaunching.
			healed, err := x.heal(ctx, b, alloc.Nodes)
			if err != nil {
				return last, err
			}
			if healed {
				x.mu.Lock()
				nodes = toPlacementNodes(x.nodes[b])
				byID = map[string]cloud.Node{}
				for _, n := range x.nodes[b] {
					byID[n.ID] = n
				}
				x.mu.Unlock()
				for t, slots := range last {
					for _, sl := range slots {
						if _, ok := byID[sl.Node]; !ok && !occupied[t] {
							delete(last, t)
						}
					}
				}
			}
			continue
		}
		if err := x.finish(b, k, st, o); err != nil {
			return last, err
		}
		doneCount++
		x.progress(b, k, doneCount, len(active))
	}
	if cancelled {
		return last, ctx.Err()
	}
	return last, nil
}

// launchAndFollow starts one gang and reports on it: started, exited, final.
func (x *run) launchAndFollow(ctx context.Context, b, k int, st spec.Stage, id string, slots []placement.Slot, byID map[string]cloud.Node, try, gpus int, results chan<- outcome) {
	h, err := x.launch(ctx, b, k, st, id, slots, byID, try)
	if err != nil {
		results <- outcome{trial: id, err: err}
		return
	}
	results <- outcome{trial: id, started: h}
	x.follow(id, h, gpus, results)
}

// launch starts one gang on its slots.
func (x *run) launch(ctx context.Context, b, k int, st spec.Stage, id string, slots []placement.Slot, byID map[string]cloud.Node, try int) (Handle, error) {
	x.mu.Lock()
	t := x.trials[id]
	x.move(t, trial.Launch)
	params := t.params
	x.mu.Unlock()
	g := Gang{Trial: id, Command: x.exp.Trainer.Command, Image: x.exp.Trainer.Image, Env: x.exp.Trainer.Env,
		CPUMHz: x.exp.Trainer.Resources.CPUMHz, MemoryMB: x.exp.Trainer.Resources.MemoryMB}
	world := 0
	for _, s := range slots {
		world += len(s.GPUs)
	}
	rank := 0
	for _, s := range slots {
		node := byID[s.Node]
		for local, gpu := range s.GPUs {
			g.Workers = append(g.Workers, Worker{Node: node, Env: trial.Env{
				TrialID: id, Experiment: x.exp.Name, Params: params, StartIter: st.StartIter, TargetIter: st.EndIter(),
				Rank: rank, WorldSize: world, LocalRank: local, MasterAddr: byID[slots[0].Node].Addr, GPUs: []int{gpu},
			}})
			rank++
		}
	}
	// Not synced: a resumed driver relaunches whatever is not done, whether or not it saw this.
	if err := x.cfg.Journal.Note(Event{Ev: EvLaunch, Bracket: b, Stage: k, Trial: id, Try: try, GPUs: world, Nodes: slotNodes(slots)}); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	return x.cfg.Runtime.Launch(ctx, g)
}

func slotNodes(slots []placement.Slot) []string {
	out := make([]string, len(slots))
	for i, s := range slots {
		out[i] = s.Node
	}
	return out
}

// follow collects a gang's reports and its end.
func (x *run) follow(id string, h Handle, gpus int, results chan<- outcome) {
	o := outcome{trial: id, start: time.Now(), gpus: gpus}
	for r := range h.Reports() {
		o.metrics, o.iter = r.Metrics, r.Iter
		x.cfg.Journal.Note(Event{Ev: EvReport, At: r.At, Trial: id, Iter: r.Iter, Metrics: r.Metrics}) // when printed
		x.mu.Lock()
		x.trials[id].metrics, x.trials[id].iter = r.Metrics, r.Iter
		x.mu.Unlock()
	}
	<-h.Exited()
	results <- outcome{trial: id, exited: true, start: o.start, gpus: gpus}
	o.err = h.Wait()
	results <- o
}

// failed journals a failed try and reports whether the trial gets another.
func (x *run) failed(b, k int, id string, try int, cause error) bool {
	retry := try <= x.cfg.MaxRetries
	msg := cause.Error()
	x.mu.Lock()
	if retry {
		x.move(x.trials[id], trial.Crashed)
	} else {
		msg = "gave up"
		x.trials[id].failed[k] = true
		x.move(x.trials[id], trial.GaveUp)
	}
	x.mu.Unlock()
	fmt.Fprintf(x.log, "trial %s stage %d try %d failed: %v (retry: %v)\n", id, k, try, cause, retry)
	x.journal(Event{Ev: EvFail, Bracket: b, Stage: k, Trial: id, Try: try, Error: msg})
	return retry
}

// finish records a trial that reached the stage's target.
func (x *run) finish(b, k int, st spec.Stage, o outcome) error {
	var metric *float64
	if v, ok := o.metrics[x.exp.Objective.Metric]; ok {
		metric = &v
	} else {
		fmt.Fprintf(x.log, "trial %s stage %d reported no %q: it ranks last\n", o.trial, k, x.exp.Objective.Metric)
	}
	if o.iter > st.EndIter() {
		fmt.Fprintf(x.log, "trial %s stage %d: last report at iteration %d, past the target %d\n", o.trial, k, o.iter, st.EndIter())
	}
	x.mu.Lock()
	t := x.trials[o.trial]
	t.done[k] = metricOrNaN(metric)
	x.move(t, trial.Reached)
	x.mu.Unlock()
	// Group-committed: the checkpoint is saved already with this report beside it, so a driver or
	// machine that dies before this line is durable costs a relaunch that re-reports the result
	// (trial.LastReportFile), never a lost or changed one.
	if err := x.cfg.Journal.Note(Event{Ev: EvDone, Bracket: b, Stage: k, Trial: o.trial, Iter: o.iter, Metrics: o.metrics, Metric: metric,
		Seconds: time.Since(o.start).Seconds() / x.cfg.TimeScale}); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

func (x *run) progress(b, k, done, total int) {
	if x.cfg.Progress == nil {
		return
	}
	failed := 0
	x.mu.Lock()
	for _, id := range x.order[b] {
		if x.trials[id].failed[k] {
			failed++
		}
	}
	x.mu.Unlock()
	x.cfg.Progress(Status{Bracket: x.brackets[b].Name, Stage: k, Stages: len(x.brackets[b].Stages), Done: done, Total: total,
		Failed: failed, Elapsed: x.specDuration(time.Since(x.start)), Cost: x.cost(time.Now()).total})
}

func (x *run) specDuration(d time.Duration) time.Duration {
	return time.Duration(float64(d) / x.cfg.TimeScale)
}

// Replay describes a run from its journal alone, without running anything: what `status` shows.
func Replay(cfg Config) (*Result, error) {
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	m, err := sim.NewModel(cfg.Experiment)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	brackets := cfg.Experiment.Algorithm.Brackets()
	cfg.Log = io.Discard
	x := newRun(cfg, m, brackets)
	x.replay(cfg.Past)
	if x.start.IsZero() {
		return nil, fmt.Errorf("replay: the journal holds no run")
	}
	return x.result(), nil
}
