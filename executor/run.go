package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// ErrCancelled is returned by Run for a run that was cancelled (`rubberband cancel`); resuming
// it needs Config.Force.
var ErrCancelled = errors.New("the run was cancelled")

// Config is one run: the experiment, its plan, and the adapters that do the work.
type Config struct {
	Experiment *spec.Experiment
	Alloc      sim.Alloc
	// ASHA is an ASHA job's plan (its GPU schedule): what an ASHA experiment runs instead of Alloc.
	ASHA     *sim.ASHAPlan
	Provider cloud.Provider
	Runtime  gang.Runtime
	Journal  *journal.Journal
	// Past holds the journal of an earlier driver of this run; Run resumes from it.
	Past []journal.Event
	// State, when set, is the state the journal's records before Past fold to (a snapshot's,
	// runstate.Resume): Past is then the records after them.
	State *runstate.State
	// Snapshot, when set, is where the run's state is written at each sync (runstate.SnapshotPath
	// of its journal), so that a driver resuming it folds only the records after.
	Snapshot string
	// RunID names a new run (journaled in its start event); a resumed run keeps its own.
	RunID string
	// TimeScale is wall seconds per spec second: 1 for real trainers, less when the local
	// provider and the synthetic trainer compress time for tests. Realized times and costs are
	// reported in spec seconds.
	TimeScale float64
	// MaxRetries bounds how often a failed trial is relaunched in one stage (default 2).
	MaxRetries int
	// KeepNodes keeps the nodes of a run that fails or is interrupted (default: release them).
	KeepNodes bool
	// Force resumes a cancelled run.
	Force bool
	// Clock is the run's time (default the wall clock). Under a clock.Sim the whole run happens
	// in virtual time: Run must then be called from one of the Sim's actors.
	Clock clock.Clock
	// Progress, when set, is told of every finished trial and stage, and of each stage (an ASHA
	// run: its rungs) under way at least every ProgressEvery of the run's clock (default 10 s;
	// negative: only as trials finish), so that a long stage is never silent.
	Progress      func(runstate.Status)
	ProgressEvery time.Duration
	// Observe, when set, sees every event once it is applied, in journal order: first the
	// journal of earlier drivers (Past), then each new one. It must not block.
	Observe func(journal.Event)
	// Live, when set, is handed (before anything runs) a function that snapshots the run as it is
	// then, safe from any goroutine: for readers on their own time (the metrics, at a scrape).
	Live func(snapshot func() *runstate.Snapshot)
	// Replan, when set, re-plans the stages not yet started at every sync, from what the run
	// observed (planner.Replan says when). Without it the plan is kept, and a budget is only
	// watched: a forecast over it is said, or stops the run under budget.stop.
	Replan bool
	// Log receives what the run notices and carries on from (nil: discarded).
	Log io.Writer
	// WarmStart are results of earlier runs that an adaptive sampler learns from before this
	// run's own (sampler.warm_start).
	WarmStart []search.Observation
	// Configurations, when set, are what an adaptive sampler's trials are given instead of a
	// draw: another run's draws replayed (a fault schedule's run checked against a clean run of
	// the same configurations: with a sampler that learns as results come, faults shift what it
	// learns from).
	Configurations map[string]spec.Config
}

// DefaultProgressEvery is how often, at the least, Progress hears of a stage under way.
const DefaultProgressEvery = 10 * time.Second

// forecastJCT is the latest forecast JCT, 0 when none was made. Callers hold x.mu.
func (x *run) forecastJCT() float64 {
	if f := x.st.Forecast; f != nil {
		return f.JCT
	}
	return 0
}

// run is the driver: the state, and the adapters that change the world. Its actors (one per
// bracket, one per launch, replacements) share it under one rule: st is read and written only
// with mu held, and only by record (which holds mu from the journal write to the apply, so that
// the journal's order is the order events were applied in). Nothing blocks while holding mu.
type run struct {
	cfg   Config
	clk   clock.Clock
	model *sim.Model
	mu    sync.Mutex
	st    *runstate.State
	log   io.Writer
	// sampler is the run's adaptive sampler, kept from draw to draw so that each trial's
	// configuration is encoded once (made at the first draw).
	sampler *search.TPE
	fitted  *search.Fitted // the sampler's model, as of fitted.Observations() results
	// pausing is set once the run pauses: its records may use the room the journal kept.
	pausing atomic.Bool
	// saved is where the journal stood at the last snapshot written, and that snapshot's size.
	saved struct{ at, size int64 }
	// stages holds the event queue of each bracket's running stage loop (under mu): where a
	// notice for one of its nodes goes.
	stages map[int]*clock.Queue[stageEvent]
	// renting holds one token: a scale holds it while it decides and journals its requests,
	// and while it journals their answers, so that scales at once (a replacement asked for
	// while another is out) count each other's nodes as coming (flying) and never ask twice. A
	// clock queue, not a mutex: a scale waiting for it is seen by virtual time as waiting.
	renting *clock.Queue[struct{}]
	// flying holds this driver's requests sent and not answered (under mu): token -> request.
	flying map[string]flight
}

// flight is a request for nodes out: count nodes of bracket's, in market (as journaled).
type flight struct {
	bracket, count int
	market         string
}

func (cfg *Config) defaults() {
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	cfg.Clock = clock.Or(cfg.Clock)
}

// ConfigFor is the configuration of a run of p; the adapters and options are the caller's.
func ConfigFor(p runstate.Plan) Config {
	return Config{Experiment: p.Experiment, Alloc: p.Alloc, ASHA: p.ASHA, TimeScale: p.TimeScale}
}

// plan is what the run's journal is folded against.
func (cfg *Config) plan() runstate.Plan {
	return runstate.Plan{Experiment: cfg.Experiment, Alloc: cfg.Alloc, ASHA: cfg.ASHA, TimeScale: cfg.TimeScale}
}

func newRun(cfg Config) (*run, error) {
	cfg.defaults()
	st := cfg.State
	if st == nil {
		var err error
		if st, err = runstate.New(cfg.plan(), cfg.Log); err != nil {
			return nil, err
		}
	}
	x := &run{cfg: cfg, clk: cfg.Clock, model: st.Model, st: st, log: cfg.Log, stages: map[int]*clock.Queue[stageEvent]{},
		renting: clock.NewQueue[struct{}](cfg.Clock), flying: map[string]flight{}}
	x.renting.Put(struct{}{})
	for _, e := range cfg.Past {
		x.st.Apply(e)
		if cfg.Observe != nil {
			cfg.Observe(e)
		}
	}
	return x, nil
}

// Run executes the plan, or resumes it from cfg.Past, and returns what was realized. A run that
// fails or is interrupted releases every node it holds (unless cfg.KeepNodes) before it returns.
func Run(ctx context.Context, cfg Config) (*runstate.Result, error) {
	x, err := newRun(cfg)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if x.cfg.Live != nil {
		x.cfg.Live(x.snapshot)
	}
	if x.st.Finished {
		return x.result(), nil
	}
	if x.st.Cancelled != "" && !x.cfg.Force {
		return x.result(), fmt.Errorf("run: %w (%s); resume --force carries on", ErrCancelled, x.st.Cancelled)
	}
	if err := x.begin(ctx); err != nil {
		return x.fail(ctx, err)
	}
	defer x.listenForNotices(ctx)()
	if x.st.ASHA != nil {
		if err := x.runASHA(ctx); err != nil {
			return x.fail(ctx, err)
		}
		return x.end(ctx)
	}
	errs := make([]error, len(x.st.Brackets))
	bctx, cancelAll := clock.WithCancel(x.clk, ctx)
	defer cancelAll()
	type ended struct {
		bracket int
		err     error
	}
	ends := clock.NewQueue[ended](x.clk)
	// A round's brackets run side by side; Hyperband's next round starts when they have all ended.
	failed := false
	for _, round := range rounds(x.st.Brackets) {
		if failed {
			break
		}
		for _, b := range round {
			x.clk.Go(fmt.Sprintf("bracket %d", b), func() { ends.Put(ended{b, x.runBracket(bctx, b)}) })
		}
		for range round {
			e, _ := ends.Get(context.WithoutCancel(ctx))
			if errs[e.bracket] = e.err; e.err != nil {
				failed = true
				cancelAll() // one bracket's failure ends the run: stop the others' gangs
			}
		}
	}
	if err := firstCause(ctx, errs); err != nil {
		return x.fail(ctx, err)
	}
	return x.end(ctx)
}

// end closes a run whose work is done.
func (x *run) end(ctx context.Context) (*runstate.Result, error) {
	// Every bracket released its nodes at its end; a node a repeated request never claimed back
	// would bill on: release whatever the provider still holds for the run.
	if err := x.releaseAll(ctx, "the run finished"); err != nil {
		return x.fail(ctx, err)
	}
	if err := x.record(journal.Event{Ev: journal.EvFinish}, true); err != nil {
		return x.fail(ctx, err)
	}
	return x.result(), nil
}

// rounds groups the brackets' indices by round, rounds in order.
func rounds(brackets []spec.Bracket) [][]int {
	var out [][]int
	for b, br := range brackets {
		for len(out) <= br.Round {
			out = append(out, nil)
		}
		out[br.Round] = append(out[br.Round], b)
	}
	return out
}

// firstCause is the error that ended a run: a bracket's own failure rather than the
// cancellation it caused in the others, unless the caller cancelled.
func firstCause(ctx context.Context, errs []error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// begin starts a new run (sampling its trials) or takes over an earlier driver's: its gangs are
// ended and its nodes reconciled with what the provider holds.
func (x *run) begin(ctx context.Context) error {
	if x.st.Start.IsZero() {
		if err := x.record(journal.Event{Ev: journal.EvStart, RunID: x.cfg.RunID}, true); err != nil {
			return err
		}
		return x.sample()
	}
	if err := x.sample(); err != nil { // a driver that died while sampling
		return err
	}
	if reaper, ok := x.cfg.Runtime.(gang.Reaper); ok {
		if err := reaper.Reap(ctx); err != nil {
			return fmt.Errorf("run: end the previous driver's gangs: %w", err)
		}
	}
	if err := x.record(journal.Event{Ev: journal.EvResume}, true); err != nil {
		return err
	}
	return x.reconcile(ctx)
}

// fail ends a run that cannot go on: every node it holds is released and journaled (unless
// KeepNodes), why is journaled (EvStop), and err is returned with what was realized. An
// infrastructure fault pauses the run instead (pause).
func (x *run) fail(ctx context.Context, err error) (*runstate.Result, error) {
	if fault, ok := infra.Is(err); ok && !errors.Is(err, context.Canceled) {
		return x.pause(ctx, fault)
	}
	if !x.cfg.KeepNodes {
		if rerr := x.releaseAll(context.WithoutCancel(ctx), "the run stopped: "+err.Error()); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	why, cause := err.Error(), journal.StopFailed
	var overBudget *BudgetError
	switch {
	case errors.Is(err, context.Canceled):
		why, cause = "interrupted", journal.StopInterrupted
	case errors.As(err, &overBudget):
		cause = journal.StopBudget
	}
	x.record(journal.Event{Ev: journal.EvStop, Error: why, Cause: string(cause)}, true) // best effort: a broken journal is what err says already
	return x.result(), err
}

// PausedError is what Run returns for a run an infrastructure fault paused: no try was spent on
// it, its gangs were stopped at their checkpoints, and `rubberband resume` carries it on once
// the fault is mended. The rule for its nodes: they are released at the pause, and billing stops
// then (journaled as node_down events before the paused stop), unless Config.KeepNodes keeps
// them; when the journal itself cannot be written nothing more is done (nothing is decided that
// the journal would not hold): the nodes are kept, and bill until a resumed driver releases them.
type PausedError struct {
	Fault *InfraError
	// Released are the nodes released at the pause; Kept says nodes were kept (KeepNodes, or the
	// journal broke). Journaled says the pause is in the journal.
	Released  []string
	Kept      bool
	Journaled bool
	// ReleaseErr is why the nodes could not all be released (or the release journaled): they may
	// bill until a resumed driver releases them.
	ReleaseErr error
}

func (e *PausedError) Error() string {
	nodes := "no nodes were held"
	switch {
	case e.Kept && !e.Journaled:
		nodes = "nothing more was done (the journal cannot hold it): its nodes are kept and bill until a resumed driver releases them"
	case e.ReleaseErr != nil:
		nodes = fmt.Sprintf("its nodes could not all be released (%v): they may bill until a resumed driver releases them", e.ReleaseErr)
	case e.Kept:
		nodes = "its nodes are kept (--keep-nodes) and bill"
	case len(e.Released) > 0:
		nodes = fmt.Sprintf("its %d node(s) were released at the pause, where billing stopped", len(e.Released))
	}
	return fmt.Sprintf("paused: %v; no try was spent; %s", e.Fault, nodes)
}

// Unwrap returns the fault.
func (e *PausedError) Unwrap() error { return e.Fault }

// pause ends a run an infrastructure fault stopped (PausedError says the rule for its nodes):
// once its gangs have stopped (the stages ended), its nodes are released and journaled, and so
// is the pause (EvStop, StopPaused: what failed and where). A journal that cannot be written
// stops everything here.
func (x *run) pause(ctx context.Context, fault *InfraError) (*runstate.Result, error) {
	x.pausing.Store(true)
	perr := &PausedError{Fault: fault, Kept: x.cfg.KeepNodes}
	if jerr := x.cfg.Journal.Err(); jerr != nil {
		perr.Kept = true
		fmt.Fprintf(x.log, "the journal cannot be written (%v): the driver stops without deciding anything more; its nodes are kept\n", jerr)
		return x.result(), perr
	}
	x.cfg.Journal.FreeRoom() // the disk may be full: what follows must be written
	if !x.cfg.KeepNodes {
		x.mu.Lock()
		for b := range x.st.Nodes {
			for _, n := range append(append([]cloud.Node(nil), x.st.Nodes[b]...), x.st.Draining[b]...) {
				perr.Released = append(perr.Released, n.ID)
			}
		}
		x.mu.Unlock()
		if err := x.releaseAll(context.WithoutCancel(ctx), "paused: "+fault.Error()); err != nil {
			perr.Released, perr.ReleaseErr = nil, err
			if x.cfg.Journal.Err() != nil {
				return x.result(), perr
			}
		}
	}
	if err := x.record(journal.Event{Ev: journal.EvStop, Error: string(journal.StopPaused) + ": " + fault.Error(), Cause: string(journal.StopPaused), Fault: fault.What, Where: fault.Where, Nodes: perr.Released}, true); err != nil {
		fmt.Fprintf(x.log, "pause: %v\n", err)
		return x.result(), perr
	}
	perr.Journaled = true
	fmt.Fprintf(x.log, "%v\n", perr)
	return x.result(), perr
}

// record journals an event, applies it, and (durable) syncs the journal before returning: the
// caller acts on a decision only once it is on disk.
func (x *run) record(e journal.Event, durable bool) error {
	if e.At.IsZero() {
		e.At = x.clk.Now()
	}
	// Once the journal's disk is full, the room it kept is the pause's: nothing else is
	// journaled (or decided), and whoever asked stops on the fault.
	full := x.cfg.Journal.Full()
	if full != nil && !x.pausing.Load() {
		return fmt.Errorf("run: %w", full)
	}
	x.mu.Lock()
	err := x.cfg.Journal.Note(e)
	if err == nil {
		x.st.Apply(e)
		if x.cfg.Observe != nil {
			x.cfg.Observe(e)
		}
	}
	x.mu.Unlock()
	if err == nil && durable {
		err = x.cfg.Journal.Sync()
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if full == nil && !x.pausing.Load() {
		if full = x.cfg.Journal.Full(); full != nil { // this record took the kept room
			return fmt.Errorf("run: %w", full)
		}
	}
	return nil
}

// sample journals every bracket's trials, and the configurations of those that samplers which
// do not learn draw at the start, for the trials the journal does not hold yet (all of them,
// unless a driver died while sampling: the draws are the same every time). An adaptive
// sampler's (tpe) trials are journaled without a configuration: it is drawn at their first
// launch (drawParams), from the results so far.
func (x *run) sample() error {
	if x.st.ASHA != nil {
		return x.sampleASHA()
	}
	first := 0
	for b, br := range x.st.Brackets {
		n := br.Trials()
		var configs []spec.Config
		if !x.cfg.Experiment.Sampler.Adaptive() && len(x.st.Order[b]) < n {
			var err error
			if configs, err = search.Initial(x.cfg.Experiment, b, first, n); err != nil {
				return fmt.Errorf("run: %w", err)
			}
		}
		for i := len(x.st.Order[b]); i < n; i++ {
			e := journal.Event{Ev: journal.EvTrial, Bracket: b, Trial: fmt.Sprintf("b%d-t%04d", b, i)}
			if configs != nil {
				e.Params = configs[i]
			}
			if err := x.record(e, false); err != nil {
				return err
			}
		}
		first += n
	}
	return x.cfg.Journal.Sync() // one sync for all of them
}

// drawParams draws the configuration of a trial an adaptive sampler has not drawn yet, from
// the results journaled (each trial's objective at the end of each stage it reached, or +Inf
// where it gave up), with the generator of the trial's index in the run: a resumed run that
// finds the draw journaled (with the launch) uses it and never draws again. The model is fitted
// again as search.Refit says (at every new result in a small job; past that, as results grow
// by a share): a refit per draw over every result made a job of 10^4 trials quadratic. Called
// with x.mu held.
func (x *run) drawParams(id string) spec.Config {
	if c, ok := x.cfg.Configurations[id]; ok {
		return c
	}
	exp := x.cfg.Experiment
	if x.sampler == nil {
		x.sampler = search.NewTPE(exp.SearchSpace, exp.Sampler)
	}
	if n := x.st.Results() + len(x.cfg.WarmStart); search.Refit(x.fitted, n) {
		x.fitted = x.sampler.Fit(x.history())
	}
	index, _ := x.st.IndexOf(id)
	return x.fitted.Draw(x.st.Drawn(), search.TrialRand(exp.SamplerSeed(), index))
}

// point is a multi-objective spec's result of trial at stage k as a sampler learns from it; a
// stage the trial failed ranks last in every objective (and infeasible, under constraints).
// Called with x.mu held.
func (x *run) point(trial string, k int) ([]float64, float64) {
	if p, ok := x.st.PointOf(trial, k); ok {
		return p.Losses, p.Violation
	}
	return search.Losses(x.cfg.Experiment, nil)
}

// history is every result journaled, as drawParams learns from them, in sampling order, and the
// warm start's. Called with x.mu held.
func (x *run) history() []search.Observation {
	exp := x.cfg.Experiment
	history := make([]search.Observation, 0, x.st.Results()+len(x.cfg.WarmStart))
	for b, order := range x.st.Order {
		stages := x.st.Brackets[b].Stages
		for _, tid := range order {
			t := x.st.Trials[tid]
			if t.Params == nil {
				continue
			}
			for k := range stages {
				metric, done := t.Done[k]
				if !done && !t.Failed[k] {
					continue
				}
				if !done {
					metric = math.NaN()
				}
				o := search.Observation{Params: t.Params, Budget: stages[k].EndIter(), Loss: search.Loss(metric, exp.Objective.Mode), Trial: tid}
				if exp.MultiObjective() {
					o.Losses, o.Violation = x.point(tid, k)
				}
				history = append(history, o)
			}
		}
	}
	for i, o := range x.cfg.WarmStart {
		o.Trial = "warm start " + strconv.Itoa(i) // no trial ID of this run has a space
		history = append(history, o)
	}
	return history
}

func (x *run) specDuration(d time.Duration) time.Duration {
	return time.Duration(float64(d) / x.cfg.TimeScale)
}

// brokenTrainer is the failure rule's verdict on the run so far (nil: carry on).
func (x *run) brokenTrainer() *runstate.BrokenTrainerError {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.st.FirstEnds.Broken(x.st.RunID)
}

// result describes the run so far.
func (x *run) result() *runstate.Result {
	now := x.clk.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.st.Result(now)
}

// snapshot is the run now.
func (x *run) snapshot() *runstate.Snapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.st.Snapshot()
}
