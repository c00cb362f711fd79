package executor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// runBracket runs one bracket's stages from the first one not yet synced.
func (x *run) runBracket(ctx context.Context, b int) error {
	br := x.st.brackets[b]
	var last placement.Placement
	for k, st := range br.Stages {
		x.mu.Lock()
		_, synced := x.st.synced[stageKey{b, k}]
		x.mu.Unlock()
		if synced {
			continue
		}
		x.mu.Lock()
		started := !x.st.stageAt[stageKey{b, k}].start.IsZero()
		x.mu.Unlock()
		if k > 0 && !started {
			// The plan of what has not started may change before it does; the nodes the stage
			// does not need go before it starts, their cost the stage before's (as the
			// simulator bills them).
			if err := x.review(ctx, b, k); err != nil {
				return err
			}
			x.mu.Lock()
			held := len(x.st.nodes[b])
			x.mu.Unlock()
			if x.st.plan[b][k].Nodes < held {
				var err error
				if last, err = x.scaleTo(ctx, b, x.st.plan[b][k].Nodes, last); err != nil {
					return err
				}
			}
		}
		if err := x.record(Event{Ev: EvStage, Bracket: b, Stage: k, GPUs: x.st.plan[b][k].GPUs}, true); err != nil {
			return err
		}
		var err error
		if last, err = x.scaleTo(ctx, b, x.st.plan[b][k].Nodes, last); err != nil {
			return err
		}
		if last, err = x.runStage(ctx, b, k, st, last); err != nil {
			return err
		}
		x.mu.Lock()
		keep, took := x.st.rank(b, k), len(x.st.active(b, k))
		x.mu.Unlock()
		if len(keep) == 0 && took > 0 {
			return fmt.Errorf("run: bracket %d stage %d: every trial failed (their logs say why)", b, k)
		}
		if k+1 < len(br.Stages) {
			keep = keep[:min(len(keep), br.Stages[k+1].Trials)]
		}
		if err := x.record(Event{Ev: EvSync, Bracket: b, Stage: k, Keep: keep}, true); err != nil {
			return err
		}
	}
	_, err := x.scaleTo(ctx, b, 0, nil)
	return err
}

// outcome is a message about one launch: started (handle), exited (its GPUs are free), or
// final (err nil when it exited 0; also sent alone when the launch itself failed).
type outcome struct {
	trial    string
	started  Handle
	exited   bool
	err      error
	metrics  map[string]float64
	iter     int
	began    time.Time
	exitedAt time.Time
	gpus     int
	timedOut bool
}

// runStage runs every trial of stage k that has not finished it: as many gangs at once as the
// stage's GPUs allow, each placed with its GPUs together, a failed one relaunched from its
// checkpoint while retries last. The loop decides; launching and following a gang happen in its
// own goroutine, so that one gang's I/O never delays the next one's start. It returns the
// stage's placement.
func (x *run) runStage(ctx context.Context, b, k int, st spec.Stage, last placement.Placement) (placement.Placement, error) {
	alloc := x.st.plan[b][k]
	gpt := sim.GPUsPerTrial(st, alloc)
	parallel := max(1, alloc.GPUs/gpt)
	budget := x.budget(st, alloc, gpt)
	x.mu.Lock()
	queue := x.st.pending(b, k)
	total := len(x.st.active(b, k))
	nodes, byID := x.bracketNodes(b)
	x.mu.Unlock()
	if last == nil {
		last = placement.Placement{}
	}
	occupied := map[string]bool{}  // gangs holding GPUs: launching or running
	handles := map[string]Handle{} // started gangs, to stop on cancellation
	inflight := 0                  // gangs whose final message is still to come
	results := make(chan outcome)
	doneCount := total - len(queue)
	cancelled := false
	// Lost nodes are replaced while the stage goes on on the others: one replacement at a time,
	// another after it when more were lost meanwhile.
	replaced := make(chan error, 1)
	replacing, again := false, false
	replace := func() {
		replacing, again = true, false
		go func() {
			_, err := x.scaleTo(ctx, b, alloc.Nodes, nil)
			replaced <- err
		}()
	}
	// Lost nodes are released once no gang of the stage runs on them: on a node being
	// interrupted, the other gangs are still saving their checkpoints within the notice, which
	// terminating it at once would lose.
	draining := map[string]bool{}
	drain := func() {
		busy := map[string]bool{}
		for t := range occupied {
			for _, sl := range last[t] {
				busy[sl.Node] = true
			}
		}
		var ids []string
		for id := range draining {
			if !busy[id] {
				ids = append(ids, id)
				delete(draining, id)
			}
		}
		slices.Sort(ids)
		x.releaseLost(ctx, ids)
	}
	defer func() { // whatever ends the stage: nothing lost keeps billing
		clear(occupied)
		drain()
	}()
	refresh := func() { // the bracket's nodes changed: place on what it holds now
		x.mu.Lock()
		nodes, byID = x.bracketNodes(b)
		x.mu.Unlock()
		for t, slots := range last {
			for _, sl := range slots {
				if _, ok := byID[sl.Node]; !ok && !occupied[t] {
					delete(last, t)
				}
			}
		}
	}
	done := ctx.Done()
	for len(queue) > 0 || inflight > 0 || replacing {
		for !cancelled && len(queue) > 0 && len(occupied) < parallel {
			id := queue[0]
			reqs := []placement.Request{{Trial: id, GPUs: gpt}}
			for r := range occupied {
				reqs = append(reqs, placement.Request{Trial: r, GPUs: gpt})
			}
			p, unplaced := placement.PlacePinned(nodes, reqs, last, occupied)
			if len(unplaced) > 0 {
				break // wait for a gang to finish, or a replacement node
			}
			for t, s := range p {
				last[t] = s
			}
			queue = queue[1:]
			occupied[id] = true
			inflight++
			go x.launchAndFollow(ctx, b, k, st, id, p[id], byID, gpt, budget, results)
		}
		if inflight == 0 && !replacing {
			if len(queue) > 0 && !cancelled {
				return last, fmt.Errorf("run: bracket %d stage %d: a gang of %d GPUs does not fit on %d nodes", b, k, gpt, len(nodes))
			}
			break
		}
		var o outcome
		select {
		case <-done:
			done, cancelled = nil, true // once: then wait for what runs to end
			for _, h := range handles {
				h.Stop()
			}
			continue
		case err := <-replaced:
			replacing = false
			if cancelled {
				continue // its error is the cancellation's
			}
			if err != nil {
				return last, err
			}
			refresh()
			if again && !cancelled {
				replace()
			}
			continue
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
			drain()
			continue
		}
		inflight--
		delete(occupied, o.trial) // a launch that failed never sent exited
		delete(handles, o.trial)
		drain()
		if cancelled {
			continue
		}
		if err := x.judge(st, &o, budget); err != nil {
			// A gang may have failed because a node of it is gone or going: forget lost nodes
			// first (the try is then not the trial's failure), and replace them.
			var doomed *InterruptedError
			errors.As(o.err, &doomed)
			lost, lerr := x.lostNodes(ctx, b, doomed)
			if lerr == nil {
				lerr = x.forget(b, lost)
			}
			if lerr != nil {
				return last, lerr
			}
			for id := range lost {
				draining[id] = true
			}
			x.stopGangsOn(lost, occupied, handles, last)
			drain()
			retry, jerr := x.failed(b, k, o, err, x.lostOne(b, o.trial))
			if jerr != nil {
				return last, jerr
			}
			if retry {
				queue = append(queue, o.trial)
			}
			if len(lost) > 0 {
				refresh()
				if replacing {
					again = true
				} else {
					replace()
				}
			}
			continue
		}
		if err := x.finish(b, k, o); err != nil {
			return last, err
		}
		doneCount++
		x.progress(b, k, doneCount, total)
	}
	if cancelled {
		return last, ctx.Err()
	}
	return last, nil
}

// stopGangsOn stops the running gangs placed on any of the lost nodes, so that they save their
// checkpoints now rather than at the end of the notice (their workers may not have read it yet).
func (x *run) stopGangsOn(lost map[string]string, occupied map[string]bool, handles map[string]Handle, last placement.Placement) {
	for t := range occupied {
		for _, sl := range last[t] {
			if _, ok := lost[sl.Node]; ok && handles[t] != nil {
				fmt.Fprintf(x.log, "trial %s: its node %s is lost: stopping its gang to save its checkpoint\n", t, sl.Node)
				handles[t].Stop()
				break
			}
		}
	}
}

// judge says why a launch that ended is not done, or nil when it reached the stage's target.
func (x *run) judge(st spec.Stage, o *outcome, budget time.Duration) error {
	switch {
	case o.err == nil && o.iter >= st.EndIter():
		return nil // reached, even if its budget ran out as it ended
	case o.timedOut:
		return fmt.Errorf("timed out: still running after its budget of %s (spec time %s); stopped", budget.Round(time.Millisecond), x.specDuration(budget).Round(time.Second))
	case errors.Is(o.err, ErrStopped):
		return fmt.Errorf("stopped at iteration %d, short of the target %d: relaunched from its checkpoint", o.iter, st.EndIter())
	case o.err != nil:
		return o.err
	case o.iter < st.EndIter():
		// Exit 0 means the target was reached; short of it the gang was interrupted (a trainer
		// that exits 0 on SIGTERM): it is relaunched from its checkpoint.
		return fmt.Errorf("exited 0 at iteration %d, short of the target %d: interrupted, not done", o.iter, st.EndIter())
	}
	return nil
}

func (x *run) bracketNodes(b int) ([]placement.Node, map[string]cloud.Node) {
	byID := map[string]cloud.Node{}
	for _, n := range x.st.nodes[b] {
		byID[n.ID] = n
	}
	return toPlacementNodes(x.st.nodes[b]), byID
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
	mean := offer.Startup.Mean() + n*it.Mean()
	sd := math.Sqrt(offer.Startup.Var() + n*it.Var())
	return time.Duration(3*(mean+3*sd)*x.cfg.TimeScale*float64(time.Second)) + launchAllowance
}

// launchAndFollow starts one gang and reports on it: started, exited, final. A gang still
// running after its budget is stopped (SIGTERM, then SIGKILL) and its end is a timeout.
func (x *run) launchAndFollow(ctx context.Context, b, k int, st spec.Stage, id string, slots []placement.Slot, byID map[string]cloud.Node, gpus int, budget time.Duration, results chan<- outcome) {
	x.mu.Lock()
	t := x.st.trials[id]
	g := BuildGang(GangSpec{Trial: id, Experiment: x.cfg.Experiment, Params: t.params, StartIter: st.StartIter, TargetIter: st.EndIter()}, slots, byID)
	g.Timeout = budget
	try := x.st.tries[trialStage{id, k}] + 1
	x.mu.Unlock()
	// Not synced: a resumed driver relaunches whatever is not done, whether or not it saw this.
	if err := x.record(Event{Ev: EvLaunch, Bracket: b, Stage: k, Trial: id, Try: try, GPUs: gpus, Nodes: slotNodes(slots)}, false); err != nil {
		results <- outcome{trial: id, err: err}
		return
	}
	began := x.cfg.Now()
	h, err := x.cfg.Runtime.Launch(ctx, g)
	if err != nil {
		results <- outcome{trial: id, err: err, began: began, exitedAt: x.cfg.Now(), gpus: gpus}
		return
	}
	results <- outcome{trial: id, started: h}
	var timedOut atomic.Bool
	timer := time.AfterFunc(budget, func() {
		timedOut.Store(true)
		fmt.Fprintf(x.log, "trial %s stage %d try %d: still running after its budget of %s: stopping it\n", id, k, try, budget.Round(time.Millisecond))
		x.record(Event{Ev: EvTimeout, Bracket: b, Stage: k, Trial: id, Try: try, Seconds: x.specDuration(budget).Seconds()}, false)
		h.Stop()
	})
	o := outcome{trial: id, began: began, gpus: gpus}
	for r := range h.Reports() {
		o.metrics, o.iter = r.Metrics, r.Iter
		x.record(Event{Ev: EvReport, At: r.At, Bracket: b, Stage: k, Trial: id, Iter: r.Iter, Metrics: r.Metrics}, false) // when printed
	}
	<-h.Exited()
	o.exitedAt = x.cfg.Now()
	timer.Stop()
	results <- outcome{trial: id, exited: true}
	o.err = h.Wait()
	o.timedOut = timedOut.Load()
	results <- o
}

func slotNodes(slots []placement.Slot) []string {
	out := make([]string, len(slots))
	for i, s := range slots {
		out[i] = s.Node
	}
	return out
}

// failed journals a failed try and reports whether the trial gets another. A try whose node was
// lost (interrupted) is counted apart from the trial's own failures.
func (x *run) failed(b, k int, o outcome, cause error, interrupted bool) (bool, error) {
	x.mu.Lock()
	ts := trialStage{o.trial, k}
	retry := x.st.fails[ts]+1 <= x.cfg.MaxRetries
	if interrupted {
		retry = x.st.interrupts[ts]+1 <= maxInterruptions
	}
	try := x.st.tries[ts]
	x.mu.Unlock()
	what := "failed"
	if interrupted {
		what = "lost its node"
	}
	fmt.Fprintf(x.log, "trial %s stage %d try %d %s: %v (retry: %v)\n", o.trial, k, try, what, cause, retry)
	err := x.record(Event{Ev: EvFail, Bracket: b, Stage: k, Trial: o.trial, Try: try, Error: cause.Error(), GaveUp: !retry,
		Interrupted: interrupted, GPUs: o.gpus, Began: o.began, Exited: o.exitedAt}, false)
	return retry, err
}

// finish records a trial that reached the stage's target.
func (x *run) finish(b, k int, o outcome) error {
	metric := new(float64)
	if v, ok := o.metrics[x.cfg.Experiment.Objective.Metric]; ok {
		*metric = v
	} else {
		metric = nil
		fmt.Fprintf(x.log, "trial %s stage %d reported no %q: it ranks last\n", o.trial, k, x.cfg.Experiment.Objective.Metric)
	}
	// Group-committed: the checkpoint is saved already with this report beside it, so a driver or
	// machine that dies before this line is durable costs a relaunch that re-reports the result
	// (trial.LastReportFile), never a lost or changed one.
	return x.record(Event{Ev: EvDone, Bracket: b, Stage: k, Trial: o.trial, Iter: o.iter, Metrics: o.metrics, Metric: metric,
		GPUs: o.gpus, Began: o.began, Exited: o.exitedAt, Seconds: x.specDuration(o.exitedAt.Sub(o.began)).Seconds()}, false)
}

func (x *run) progress(b, k, done, total int) {
	if x.cfg.Progress == nil {
		return
	}
	failed := 0
	x.mu.Lock()
	for _, id := range x.st.order[b] {
		if x.st.trials[id].failed[k] {
			failed++
		}
	}
	elapsed := x.specDuration(x.cfg.Now().Sub(x.st.start))
	x.mu.Unlock()
	x.cfg.Progress(Status{Bracket: x.st.brackets[b].Name, Stage: k, Stages: len(x.st.brackets[b].Stages), Done: done, Total: total,
		Failed: failed, Elapsed: elapsed, Cost: x.cost(x.cfg.Now())})
}
