package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// runBracket runs one bracket's stages from the first one not yet synced.
func (x *run) runBracket(ctx context.Context, b int) error {
	br := x.st.Brackets[b]
	var last placement.Placement
	for k, st := range br.Stages {
		x.mu.Lock()
		_, synced := x.st.Synced[runstate.StageKey{Bracket: b, Stage: k}]
		started := !x.st.StageAt[runstate.StageKey{Bracket: b, Stage: k}].Start.IsZero()
		x.mu.Unlock()
		if synced {
			continue
		}
		if k > 0 && !started {
			// The plan of what has not started may change before it does; the nodes the stage
			// does not need go before it starts, their cost the stage before's (as the
			// simulator bills them).
			if err := x.review(ctx, b, k); err != nil {
				return err
			}
			x.mu.Lock()
			held := len(x.st.Nodes[b])
			x.mu.Unlock()
			if want := x.planOf(b, k).Nodes; want < held {
				var err error
				if last, err = x.shrinkTo(ctx, b, want, last); err != nil {
					return err
				}
			}
		}
		alloc := x.planOf(b, k)
		if err := x.record(journal.Event{Ev: journal.EvStage, Bracket: b, Stage: k, GPUs: alloc.GPUs}, true); err != nil {
			return err
		}
		var err error
		stop := x.heartbeat(ctx, fmt.Sprintf("nodes of bracket %d stage %d", b, k), func() { x.starting(b, k, alloc.Nodes) })
		last, err = x.scaleTo(ctx, b, alloc.Nodes, last)
		if stop(); err != nil {
			return err
		}
		if last, err = x.runStage(ctx, b, k, st, last); err != nil {
			return err
		}
		x.mu.Lock()
		keep, took := x.st.Rank(b, k), len(x.st.Active(b, k))
		x.mu.Unlock()
		if len(keep) == 0 && took > 0 {
			return fmt.Errorf("run: bracket %d stage %d: every trial failed (their logs say why)", b, k+1)
		}
		if k+1 < len(br.Stages) {
			keep = keep[:min(len(keep), br.Stages[k+1].Trials)]
		}
		if err := x.record(journal.Event{Ev: journal.EvSync, Bracket: b, Stage: k, Keep: keep}, true); err != nil {
			return err
		}
		x.saveState()
	}
	_, err := x.scaleTo(ctx, b, 0, nil)
	return err
}

// planOf is bracket b's plan for stage k, read under the lock (a re-plan changes it).
func (x *run) planOf(b, k int) sim.StageAlloc {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.st.Plan[b][k]
}

// runStage runs every trial of stage k that has not finished it (runJobs). It returns the
// stage's placement.
func (x *run) runStage(ctx context.Context, b, k int, st spec.Stage, last placement.Placement) (placement.Placement, error) {
	x.mu.Lock()
	alloc := x.st.Plan[b][k]
	queue := x.st.Pending(b, k)
	total := len(x.st.Active(b, k))
	x.mu.Unlock()
	gpt := sim.GPUsPerTrial(st, alloc)
	budget := x.budget(st, alloc, gpt)
	jobs := make([]job, len(queue))
	for i, id := range queue {
		jobs[i] = job{trial: id, bracket: b, k: k, st: st, budget: budget}
	}
	m := newStage(b, gpt, max(1, alloc.GPUs/gpt), alloc.Nodes, x.cfg.TimeScale, x.cfg.MaxRetries, jobs, last, false)
	if alloc.OnDemand > 0 {
		x.mu.Lock()
		m.tiers = x.tiersOf(alloc, gpt, x.st.Active(b, k))
		x.mu.Unlock()
	}
	var done atomic.Int64 // the heartbeat reads it from its own actor
	done.Store(int64(total - len(queue)))
	defer x.heartbeat(ctx, fmt.Sprintf("progress of bracket %d stage %d", b, k), func() { x.progress(b, k, int(done.Load()), total) })()
	return x.runJobs(ctx, b, m, nil, func(k int) {
		x.progress(b, k, int(done.Add(1)), total)
	})
}

// heartbeat tells say, from an actor of its own, every ProgressEvery of the run's clock until
// the function it returns is called (which waits for that actor to end): a stage under way is
// never silent for long, whether or not a trial finishes.
func (x *run) heartbeat(ctx context.Context, name string, say func()) (stop func()) {
	every := x.cfg.ProgressEvery
	if x.cfg.Progress == nil || every < 0 {
		return func() {}
	}
	hctx, cancel := clock.WithCancel(x.clk, ctx)
	ended := clock.NewQueue[struct{}](x.clk)
	x.clk.Go(name, func() {
		defer ended.Put(struct{}{})
		say()                                                  // at once: the phase before (the nodes' start) may have said its last up to every ago
		for clock.SleepBackground(hctx, x.clk, every) == nil { // never what keeps virtual time going
			say()
		}
	})
	return func() {
		cancel()
		ended.Get(context.WithoutCancel(ctx))
	}
}

// tiersOf is a hedged stage's tiers (alloc.OnDemand > 0; trials in the stage's order, gpt GPUs
// each): as the simulator lays the stage out (sim's spotLayout), trial i runs on slot i mod P of
// the P = GPUs/gpt slots, and the slots are packed on the nodes in order, the on-demand ones
// first; the on-demand nodes beyond those the slots need (the nodes beyond what the GPUs need)
// are standby room. The trials of the slots wholly on the on-demand nodes that hold slots are
// critical: they go on demand. An interrupted gang moves to free on-demand room when a
// replacement takes time (the offer's mean SCALE, INIT and DATA). Callers hold x.mu.
func (x *run) tiersOf(alloc sim.StageAlloc, gpt int, trials []string) *tiers {
	o, _ := x.model.OfferIndex(alloc)
	offer := x.model.Offers[o]
	gpn := max(offer.GPUsPerNode, 1)
	slots := max(1, alloc.GPUs/gpt)
	standby := min(alloc.OnDemand, max(0, alloc.Nodes-(slots*gpt+gpn-1)/gpn))
	busy := alloc.OnDemand - standby // on-demand nodes that hold slots
	onBusy := busy * gpn / gpt       // slots wholly on them
	if gpt <= gpn {
		onBusy = busy * (gpn / gpt)
	}
	t := &tiers{critical: map[string]bool{}, od: map[string]bool{}, lostNode: map[string]bool{}}
	for i, id := range trials {
		if i%slots < onBusy {
			t.critical[id] = true
		}
	}
	replace := offer.DataLatency
	if offer.Scale != nil {
		replace += offer.Scale.Mean()
	}
	if offer.Init != nil {
		replace += offer.Init.Mean()
	}
	t.moveFirst = replace > 0
	return t
}

// jobSource hands a job loop more work as gangs end (ASHA's promotions); a stage's loop has none.
type jobSource interface {
	// more journals the jobs to start now, with free gangs able to start at once, and says how
	// many gangs may run and how many nodes are held from now on; an error stops the loop.
	more(free int) (stageEvent, error)
}

// runJobs runs a job loop: its decisions (stage.step) say what to do, and this loop does it —
// journal, start and stop gangs, ask the provider, ask the source — and feeds back what happened.
// Launching and following a gang happen in an actor of its own, so that one gang's I/O never
// delays the next one's start. done is told of every job done. It returns the placement.
func (x *run) runJobs(ctx context.Context, b int, m *stage, src jobSource, done func(k int)) (placement.Placement, error) {
	view := &bracketView{x: x, b: b}
	events := clock.NewQueue[stageEvent](x.clk)
	m.restartOnNotice = x.cfg.Experiment.Cluster.Spot.OnNotice == spec.OnNoticeRestart
	x.mu.Lock()
	x.stages[b] = events // the bracket's nodes' notices come here now
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.stages, b)
		x.mu.Unlock()
	}()
	handles := map[int]gang.Handle{}
	atReport := map[int]*atomic.Bool{} // each launch's flag: tell the stage of its next report
	wait := ctx                        // until the stage is cancelled; then without, to see its gangs end
	var stopped error                  // why the source stopped the loop
	acts := m.begin(view)
	for {
		var next []stageEvent // what an action learnt at once, decided on before anything else
		for _, a := range acts {
			switch a.kind {
			case acLaunch:
				flag := new(atomic.Bool)
				atReport[a.launch] = flag
				x.launch(ctx, b, a, m.gpt, events, flag)
			case acStopAtReport:
				if f := atReport[a.launch]; f != nil {
					f.Store(true)
				}
			case acStop:
				if h := handles[a.launch]; h != nil {
					h.Stop()
				}
			case acTimeout:
				budget := m.jobs[a.trial].budget
				fmt.Fprintf(x.log, "trial %s stage %d: still running after its budget of %s: stopping it\n", a.trial, a.k+1, budget.Round(time.Millisecond))
				launches, _, _ := view.tries(a.trial, a.k)
				x.record(journal.Event{Ev: journal.EvTimeout, Bracket: a.bracket, Stage: a.k, Trial: a.trial, Try: launches, Seconds: x.specDuration(budget).Seconds()}, false)
			case acCheckNodes:
				lost, err := x.lostNodes(ctx, b, a.doomed)
				next = append(next, stageEvent{kind: evChecked, launch: a.launch, o: a.o, cause: a.cause, lost: lost, err: err})
			case acForget:
				if err := x.forget(ctx, b, a.lost); err != nil {
					x.releaseLost(ctx, b, m.drainAll())
					return m.last, err
				}
			case acRelease:
				x.releaseLost(ctx, b, a.nodes)
			case acRetire:
				if err := x.retire(ctx, b, a.nodes); err != nil {
					x.releaseLost(ctx, b, m.drainAll())
					return m.last, err
				}
			case acFail:
				if err := x.failed(a.bracket, a.k, a); err != nil {
					if f, ok := infra.Is(err); ok && f.What != infra.JournalBroken { // the gangs stop at their checkpoints first
						next = append(next, stageEvent{kind: evFault, err: err})
						continue
					}
					x.releaseLost(ctx, b, m.drainAll())
					return m.last, err
				}
				if stopped == nil {
					if broken := x.brokenTrainer(); broken != nil { // the gangs in flight stop first
						fmt.Fprintf(x.log, "%v\n", broken)
						stopped = broken
						next = append(next, stageEvent{kind: evCancel})
					}
				}
			case acDone:
				if err := x.finish(a.bracket, a.k, a.o); err != nil {
					if f, ok := infra.Is(err); ok && f.What != infra.JournalBroken { // not journaled: a resumed run re-reports it
						next = append(next, stageEvent{kind: evFault, err: err})
						continue
					}
					x.releaseLost(ctx, b, m.drainAll())
					return m.last, err
				}
				done(a.k)
			case acWant:
				e, err := src.more(a.free)
				if over := (*BudgetError)(nil); errors.As(err, &over) {
					// The source stops for the budget: the gangs in flight stop first, at their
					// checkpoints, for a resumed run to relaunch.
					stopped = err
					next = append(next, stageEvent{kind: evWork, parallel: m.parallel, keep: m.keep, exhausted: true}, stageEvent{kind: evCancel})
					continue
				}
				if f, ok := infra.Is(err); ok && f.What != infra.JournalBroken { // its gangs stop first
					next = append(next, stageEvent{kind: evWork, parallel: m.parallel, keep: m.keep}, stageEvent{kind: evFault, err: err})
					continue
				}
				if err != nil {
					x.releaseLost(ctx, b, m.drainAll())
					return m.last, err
				}
				next = append(next, e)
			case acReplace:
				x.clk.Go(fmt.Sprintf("replace b%d", b), func() {
					_, err := x.scaleTo(ctx, b, a.count, nil)
					events.Put(stageEvent{kind: evReplaced, err: err})
				})
			case acLog:
				fmt.Fprint(x.log, a.text)
			case acEnd:
				x.releaseLost(ctx, b, a.nodes)
				if a.err == nil && m.cancelled {
					a.err = cmp.Or(stopped, ctx.Err())
				}
				return m.last, a.err
			}
		}
		var e stageEvent
		if len(next) > 0 {
			e, next = next[0], next[1:]
		} else {
			var err error
			if e, err = events.Get(wait); err != nil {
				wait = context.WithoutCancel(ctx)
				e = stageEvent{kind: evCancel}
			}
		}
		switch e.kind {
		case evStarted:
			handles[e.launch] = e.handle
		case evEnded:
			delete(handles, e.launch)
			delete(atReport, e.launch)
		}
		acts = m.step(view, e)
		for _, n := range next { // an answer to acCheckNodes or acWant, or a fault
			acts = append(acts, m.step(view, n)...)
		}
	}
}

// bracketView is what the stage loop shows stage.step of the run.
type bracketView struct {
	x *run
	b int
}

func (v *bracketView) nodes() []cloud.Node {
	v.x.mu.Lock()
	defer v.x.mu.Unlock()
	return append([]cloud.Node(nil), v.x.st.Nodes[v.b]...)
}

func (v *bracketView) nodesGen() uint64 {
	v.x.mu.Lock()
	defer v.x.mu.Unlock()
	return v.x.st.NodesGen(v.b)
}

func (v *bracketView) tries(trial string, k int) (launches, fails, interrupts int) {
	v.x.mu.Lock()
	defer v.x.mu.Unlock()
	ts := runstate.TrialStage{Trial: trial, Stage: k}
	return v.x.st.Tries[ts], v.x.st.Fails[ts], v.x.st.Interrupts[ts]
}

// budget is how long one launch of a stage may run before it is stopped and retried: three
// times its predicted p99.9 duration (start-up and iterations, mean plus 3σ), compressed by the
// time scale, plus a minute of wall time, not compressed, for what the profile does not see
// (scheduling, process start, checkpoint transfer: they take as long at any time scale; a
// compressed minute of three seconds timed out every other gang on Nomad).
// trainer.timeout in the spec overrides it. The profile is that of the stage's instance type.
// launchAllowance is the wall time a launch is given beyond its profile (see budget).
const launchAllowance = time.Minute

func (x *run) budget(st spec.Stage, alloc sim.StageAlloc, gpus int) time.Duration {
	if t := x.cfg.Experiment.Trainer.Timeout.D(); t > 0 {
		return time.Duration(float64(t) * x.cfg.TimeScale)
	}
	o, _ := x.model.OfferIndex(alloc)
	offer := x.model.Offers[o]
	it := offer.IterLatency(gpus)
	n := float64(st.Iters)
	upMean, upVar := offer.Launch()
	mean := upMean + n*it.Mean()
	sd := math.Sqrt(upVar + n*it.Var())
	return time.Duration(3*(mean+3*sd)*x.cfg.TimeScale*float64(time.Second)) + launchAllowance
}

// launch journals a launch (here, in the stage's actor: the journal's order is the order the
// stage decided in), then starts and follows its gang in an actor of its own, which tells the
// stage loop started, exited and ended; a gang still running after its budget is the stage's to
// stop (evTimeout).
func (x *run) launch(ctx context.Context, b int, a action, gpus int, events *clock.Queue[stageEvent], atReport *atomic.Bool) {
	k, st, budget := a.job.k, a.job.st, a.job.budget
	x.mu.Lock()
	t := x.st.Trials[a.trial]
	nodes := map[string]cloud.Node{} // the gang's, of those the bracket holds
	for _, sl := range a.slots {
		if n, ok := x.st.HeldNode(b, sl.Node); ok {
			nodes[n.ID] = n
		}
	}
	params, drawn := t.Params, false
	if params == nil && x.cfg.Experiment.Sampler.Adaptive() {
		params, drawn = x.drawParams(a.trial), true
	}
	x.mu.Unlock()
	g := gang.BuildGang(gang.GangSpec{Trial: a.trial, Experiment: x.cfg.Experiment, Params: params, StartIter: st.StartIter, TargetIter: st.EndIter()}, a.slots, nodes)
	g.Timeout = budget
	// Not synced: a resumed driver relaunches whatever is not done, whether or not it saw this;
	// unless it carries a configuration just drawn: the trainer must never start on one the
	// journal could lose (a resumed driver would draw another and resume its checkpoint with it).
	launch := journal.Event{Ev: journal.EvLaunch, Bracket: a.bracket, Stage: k, Trial: a.trial, Try: a.try, GPUs: gpus, Nodes: slotNodes(a.slots)}
	if drawn {
		launch.Params = params
	}
	if err := x.record(launch, drawn); err != nil {
		events.Put(stageEvent{kind: evEnded, launch: a.launch, o: outcome{err: err}})
		return
	}
	x.clk.Go(fmt.Sprintf("launch %s try %d", a.trial, a.try), func() {
		o := outcome{trial: a.trial, gpus: gpus, began: x.clk.Now()}
		h, err := x.cfg.Runtime.Launch(ctx, g)
		if err != nil {
			o.err, o.exitedAt = err, x.clk.Now()
			events.Put(stageEvent{kind: evEnded, launch: a.launch, o: o})
			return
		}
		o.started = true
		events.Put(stageEvent{kind: evStarted, launch: a.launch, handle: h})
		timer := x.clk.AfterFunc(budget, func() { events.Put(stageEvent{kind: evTimeout, launch: a.launch}) })
		follow := context.WithoutCancel(ctx) // a stopped gang is followed to its end
		for {
			r, ok, _ := clock.Recv(follow, x.clk, h.Reports())
			if !ok {
				break
			}
			o.metrics, o.iter = r.Metrics, r.Iter
			x.record(journal.Event{Ev: journal.EvReport, At: r.At, Bracket: a.bracket, Stage: k, Trial: a.trial, Iter: r.Iter, Metrics: r.Metrics}, false) // when printed
			if atReport.CompareAndSwap(true, false) {
				events.Put(stageEvent{kind: evReported, launch: a.launch, o: outcome{iter: r.Iter}})
			}
		}
		clock.Recv(follow, x.clk, h.Exited())
		o.exitedAt = x.clk.Now()
		timer.Stop()
		events.Put(stageEvent{kind: evExited, launch: a.launch})
		o.err = h.Wait()
		events.Put(stageEvent{kind: evEnded, launch: a.launch, o: o})
	})
}

func slotNodes(slots []placement.Slot) []string {
	out := make([]string, len(slots))
	for i, s := range slots {
		out[i] = s.Node
	}
	return out
}

// failed journals a failed try (a.retry: whether the trial gets another). A try whose node was
// lost (a.interrupted) is counted apart from the trial's own failures.
func (x *run) failed(b, k int, a action) error {
	x.mu.Lock()
	try := x.st.Tries[runstate.TrialStage{Trial: a.trial, Stage: k}]
	x.mu.Unlock()
	what := "failed"
	if a.interrupted {
		what = "lost its node"
	}
	fmt.Fprintf(x.log, "trial %s stage %d try %d %s: %v (retry: %v)\n", a.trial, k+1, try, what, a.cause, a.retry)
	return x.record(journal.Event{Ev: journal.EvFail, Bracket: b, Stage: k, Trial: a.trial, Try: try, Error: a.cause.Error(), GaveUp: !a.retry,
		Interrupted: a.interrupted, NotStarted: !a.o.started, GPUs: a.o.gpus, Began: a.o.began, Exited: a.o.exitedAt}, false)
}

// finish records a trial that reached the stage's target.
func (x *run) finish(b, k int, o outcome) error {
	metric := new(float64)
	if v, ok := o.metrics[x.cfg.Experiment.Objective.Metric]; ok {
		*metric = v
	} else {
		metric = nil
		fmt.Fprintf(x.log, "trial %s stage %d reported no %q: it ranks last\n", o.trial, k+1, x.cfg.Experiment.Objective.Metric)
	}
	if slices.Contains(x.cfg.Experiment.Metrics(), spec.CostMetric) {
		// The meter's dollars, journaled with the result: a replay ranks by the same figure.
		at := o.exitedAt
		if at.IsZero() {
			at = x.clk.Now()
		}
		x.mu.Lock()
		cost := x.st.TrialCost(o.trial, at)
		x.mu.Unlock()
		o.metrics = maps.Clone(o.metrics)
		if o.metrics == nil {
			o.metrics = map[string]float64{}
		}
		o.metrics[spec.CostMetric] = cost
	}
	// Group-committed: the checkpoint is saved already with this report beside it, so a driver or
	// machine that dies before this line is durable costs a relaunch that re-reports the result
	// (trial.LastReportFile), never a lost or changed one.
	return x.record(journal.Event{Ev: journal.EvDone, Bracket: b, Stage: k, Trial: o.trial, Iter: o.iter, Metrics: o.metrics, Metric: metric,
		GPUs: o.gpus, Began: o.began, Exited: o.exitedAt, Seconds: x.specDuration(o.exitedAt.Sub(o.began)).Seconds()}, false)
}

func (x *run) progress(b, k, done, total int) { x.progressWith(b, k, done, total, 0) }

// progressWith reports stage k of bracket b, starting nodes still to come up.
func (x *run) progressWith(b, k, done, total, starting int) {
	if x.cfg.Progress == nil {
		return
	}
	x.mu.Lock()
	failed := x.st.FailedIn(b, k)
	running, iters := x.st.Underway(b, k)
	st := x.st.Brackets[b].Stages[k]
	elapsed, forecast, cost := x.specDuration(x.clk.Now().Sub(x.st.Start)), x.forecastJCT(), x.st.Spent(x.clk.Now())
	x.mu.Unlock()
	x.cfg.Progress(runstate.Status{Bracket: x.st.Brackets[b].Name, Stage: k, Stages: len(x.st.Brackets[b].Stages), Done: done, Total: total,
		Failed: failed, Running: running, Iters: iters, ItersTotal: total * st.Iters, Starting: starting, Elapsed: elapsed, Cost: cost, Forecast: forecast})
}

// starting reports stage k of bracket b while it waits for its nodes (want in all) to start.
func (x *run) starting(b, k, want int) {
	x.mu.Lock()
	held := len(x.st.Nodes[b])
	total := len(x.st.Active(b, k))
	x.mu.Unlock()
	if held >= want {
		return
	}
	x.progressWith(b, k, 0, total, want-held)
}
