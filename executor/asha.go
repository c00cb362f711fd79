package executor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// An ASHA run (paper: Li et al., MLSys 2020) is one job loop on one cluster, held under bracket 0
// (its brackets of early-stopping rates share it): each gang that ends asks the promotion state
// (package asha, folded from the journal) for the jobs to start, each a trial through one rung;
// the cluster holds the GPUs of the plan's phase, which advances at events (the work that can
// still run falls to the next phase's GPUs), never at clock times, as sim.SimulateASHA has it.
// Decisions are journaled before they are acted on (EvPromote, EvPhase), so a resumed run takes
// each promotion once and relaunches the jobs in flight from their checkpoints.

// sampleASHA journals the trials not journaled yet, in the ladder's order (trial i in bracket
// i mod B), with their configurations unless the sampler draws them at launch.
func (x *run) sampleASHA() error {
	a := x.cfg.Experiment.Algorithm.ASHA
	brackets := max(a.Brackets, 1)
	x.mu.Lock()
	have := len(x.st.ASHA.ByIndex)
	x.mu.Unlock()
	var configs []spec.Config
	if !x.cfg.Experiment.Sampler.Adaptive() && have < a.Trials {
		var err error
		if configs, err = search.Initial(x.cfg.Experiment, 0, 0, a.Trials); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	for i := have; i < a.Trials; i++ {
		b := i % brackets
		e := journal.Event{Ev: journal.EvTrial, Bracket: b, Trial: fmt.Sprintf("b%d-t%04d", b, i)}
		if configs != nil {
			e.Params = configs[i]
		}
		if err := x.record(e, false); err != nil {
			return err
		}
	}
	return x.cfg.Journal.Sync()
}

// runASHA runs the job loop from where the journal left it: the jobs in flight first.
func (x *run) runASHA(ctx context.Context) error {
	x.mu.Lock()
	a := x.st.ASHA
	began := len(a.PhaseAt) > 0
	x.mu.Unlock()
	if !began {
		if err := x.record(journal.Event{Ev: journal.EvPhase, Phase: 0, GPUs: a.Plan.GPUs[0]}, true); err != nil {
			return err
		}
	}
	x.mu.Lock()
	gpus := a.Plan.GPUs[len(a.PhaseAt)-1]
	var jobs []job
	for _, j := range a.Ladder.Jobs() {
		jobs = append(jobs, x.ashaJob(j))
	}
	x.mu.Unlock()
	nodes := x.model.NodesFor(gpus)
	if _, err := x.scaleTo(ctx, 0, nodes, nil); err != nil {
		return err
	}
	m := newStage(0, 1, gpus, nodes, x.cfg.TimeScale, x.cfg.MaxRetries, jobs, nil, true)
	x.mu.Lock()
	src := &ashaSource{x: x, ctx: ctx, milestone: x.milestone()}
	x.mu.Unlock()
	stop := x.heartbeat(ctx, "progress of the asha rungs", x.ashaHeartbeat)
	_, err := x.runJobs(ctx, 0, m, src, x.ashaProgress)
	if stop(); err != nil {
		return err
	}
	x.mu.Lock()
	_, _, anyResult := a.Ladder.Best()
	x.mu.Unlock()
	if !anyResult { // as a synchronous stage whose every trial failed: no winner is no finish
		return fmt.Errorf("run: asha: every trial failed (their logs say why)")
	}
	_, err = x.scaleTo(ctx, 0, 0, nil)
	return err
}

// enterPhases journals the phases the run enters now: the one a revision of the schedule begins
// (ashaState.enterNow), and, once every trial started, those whose GPUs the work that can still
// run now (the jobs in flight and the promotions waiting) has fallen to. It says whether it
// entered any.
func (x *run) enterPhases() (bool, error) {
	x.mu.Lock()
	a := x.st.ASHA
	phase := len(a.PhaseAt) - 1
	next := max(phase, a.EnterNow)
	if a.Ladder.Started() >= x.cfg.Experiment.Algorithm.ASHA.Trials {
		demand := a.Ladder.InFlight() + a.Ladder.Promotable()
		for next+1 < len(a.Plan.GPUs) && demand <= a.Plan.GPUs[next+1] {
			next++
		}
	}
	gpus := slices.Clone(a.Plan.GPUs)
	x.mu.Unlock()
	for p := phase + 1; p <= next; p++ {
		fmt.Fprintf(x.log, "asha: phase %d of %d: %d GPUs\n", p+1, len(gpus), gpus[p])
		if err := x.record(journal.Event{Ev: journal.EvPhase, Phase: p, GPUs: gpus[p]}, true); err != nil {
			return false, err
		}
	}
	return next > phase, nil
}

// ashaJob is a ladder's job as the job loop runs it. Callers hold x.mu.
func (x *run) ashaJob(j asha.Job) job {
	st := x.st.Brackets[j.Bracket].Stages[j.Rung]
	return job{trial: x.st.ASHA.ByIndex[j.Trial], bracket: j.Bracket, k: j.Rung, st: st, budget: x.budget(st, x.st.Plan[j.Bracket][j.Rung], 1)}
}

// ashaSource hands the job loop ASHA's jobs, and weighs a revision of the schedule (review) as
// the run enters a phase, and in the first phase at each quarter of the trials started: the
// milestone reviewed last is kept here (a resumed run reviews from the next one on).
type ashaSource struct {
	x         *run
	ctx       context.Context
	milestone int
}

// milestone is how many quarters of the trials an ASHA run has started. Callers hold x.mu.
func (x *run) milestone() int {
	return 4 * x.st.ASHA.Ladder.Started() / x.cfg.Experiment.Algorithm.ASHA.Trials
}

var _ jobSource = (*ashaSource)(nil)

// more enters the phases the work that can still run now allows (once every trial started: the
// jobs in flight and the promotions waiting, at most the next phase's GPUs), then journals the
// jobs the ladder hands out, up to the phase's GPUs in flight.
func (s *ashaSource) more(int) (stageEvent, error) {
	x := s.x
	entered, err := x.enterPhases()
	if err != nil {
		return stageEvent{}, err
	}
	x.mu.Lock()
	a := x.st.ASHA
	phase, milestone := len(a.PhaseAt)-1, x.milestone()
	x.mu.Unlock()
	if entered || milestone > s.milestone {
		s.milestone = milestone
		if err := x.reviewASHA(s.ctx, phase); err != nil {
			return stageEvent{}, err
		}
		if _, err := x.enterPhases(); err != nil { // the phase a revision begins now
			return stageEvent{}, err
		}
	}
	x.mu.Lock()
	gpus := a.Plan.GPUs[len(a.PhaseAt)-1]
	x.mu.Unlock()
	var jobs []job
	for {
		x.mu.Lock()
		j, ok := a.Ladder.Peek()
		ok = ok && a.Ladder.InFlight() < gpus
		var e journal.Event
		if ok {
			e = journal.Event{Ev: journal.EvPromote, Bracket: j.Bracket, Stage: j.Rung, Trial: a.ByIndex[j.Trial], Iter: j.To}
		}
		x.mu.Unlock()
		if !ok {
			break
		}
		if err := x.record(e, false); err != nil {
			return stageEvent{}, err
		}
		x.mu.Lock()
		jobs = append(jobs, x.ashaJob(j))
		x.mu.Unlock()
	}
	x.mu.Lock()
	done := a.Ladder.Done()
	x.mu.Unlock()
	return stageEvent{kind: evWork, jobs: jobs, parallel: gpus, keep: x.model.NodesFor(gpus), exhausted: done}, nil
}

// ashaProgress tells Progress of a job done at rung k: its results against what the rung holds
// at the least, the jobs training now and the iterations reported so far.
func (x *run) ashaProgress(k int) {
	if x.cfg.Progress == nil {
		return
	}
	x.mu.Lock()
	s := x.ashaStatus(k, false)
	x.mu.Unlock()
	x.cfg.Progress(s)
}

// ashaHeartbeat tells Progress of the highest rung reached so far.
func (x *run) ashaHeartbeat() {
	x.mu.Lock()
	a, top := x.st.ASHA, 0
	for b, br := range x.st.Brackets {
		for k := range br.Stages {
			if k > top && a.Ladder.Results(b, k) > 0 {
				top = k
			}
		}
	}
	s := x.ashaStatus(top, true)
	x.mu.Unlock()
	x.cfg.Progress(s)
}

// ashaStatus is the run's status at rung k, with the iterations reported in all when iters (the
// heartbeat's, not each result's). Callers hold x.mu.
func (x *run) ashaStatus(k int, withIters bool) runstate.Status {
	a := x.st.ASHA
	done, least := 0, 0
	for b := range x.st.Brackets {
		if k < len(x.st.Brackets[b].Stages) {
			done += a.Ladder.Results(b, k)
			least += x.st.Brackets[b].Stages[k].Trials
		}
	}
	iters := 0
	if withIters {
		iters = x.st.ItersReported()
	}
	elapsed, forecast := x.specDuration(x.clk.Now().Sub(x.st.Start)), x.forecastJCT()
	return runstate.Status{Bracket: "asha", Stage: k, Stages: len(x.st.Brackets[0].Stages), Done: done, Total: least, Rungs: true,
		Running: len(x.st.OpenLaunch), Iters: iters, Elapsed: elapsed, Cost: x.st.Spent(x.clk.Now()), Forecast: forecast}
}

// reviewASHA weighs a revision of the schedule from phase p, the one the run is in, on: from what
// the run observed (every rung's iterations alike: its rungs run side by side), where its
// ladder, jobs and nodes stand, and what it spent (planner.ReplanASHA decides; act acts).
func (x *run) reviewASHA(ctx context.Context, p int) error {
	if !x.reviews() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	model, now := x.ashaPresent(x.clk.Now())
	x.mu.Unlock()
	rev, err := planner.ReplanASHA(model, *x.cfg.Experiment.Algorithm.ASHA, now, x.reviewRules(0, p))
	if err != nil {
		fmt.Fprintf(x.log, "re-plan of the asha schedule in phase %d: %v: the plan is kept\n", p+1, err)
		return nil
	}
	plan := make([]sim.StageAlloc, len(rev.ASHA.GPUs))
	for i, g := range rev.ASHA.GPUs {
		plan[i] = sim.StageAlloc{GPUs: g, Nodes: x.model.NodesFor(g)}
	}
	return x.act(rev, reviewed{stage: p, phase: true, where: fmt.Sprintf("asha from phase %d", p+1),
		before: now.Plan.GPUs, plan: plan, after: rev.ASHA.String()})
}

// ashaPresent is where an ASHA run in its current phase stands now, with the model as the run
// observed it. Callers hold x.mu.
func (x *run) ashaPresent(now time.Time) (*sim.Model, planner.ASHAPresent) {
	s, a := x.st, x.st.ASHA
	start := sim.ASHAStart{
		Ladder:  a.Ladder.Clone(),
		Trained: map[int]int{}, Running: map[int]bool{}, Nodes: len(s.Nodes[0]),
	}
	for _, j := range a.Ladder.Jobs() {
		t := s.Trials[a.ByIndex[j.Trial]]
		if t.Iter > j.From {
			start.Trained[j.Trial] = t.Iter
		}
		start.Running[j.Trial] = t.State == trial.Running
	}
	phase := len(a.PhaseAt) - 1
	return x.model.Posterior(x.st.SimEvidence(func(runstate.EvidenceKey) float64 { return 1 }, now)), planner.ASHAPresent{
		Start:   start,
		Plan:    sim.ASHAPlan{GPUs: slices.Clone(a.Plan.GPUs[phase:])},
		Elapsed: now.Sub(s.Start).Seconds() / x.cfg.TimeScale,
		Spent:   x.st.Bill(now).Total,
	}
}
