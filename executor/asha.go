package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// An ASHA run (paper: Li et al., MLSys 2020) is one job loop on one cluster, held under bracket 0
// (its brackets of early-stopping rates share it): each gang that ends asks the promotion state
// (package asha, folded from the journal) for the jobs to start, each a trial through one rung;
// the cluster holds the GPUs of the plan's phase, which advances at events (the work that can
// still run falls to the next phase's GPUs), never at clock times, as sim.SimulateASHA has it.
// Decisions are journaled before they are acted on (EvPromote, EvPhase), so a resumed run takes
// each promotion once and relaunches the jobs in flight from their checkpoints.

// ErrNoASHAPlan is returned for an ASHA job run without its plan.
var ErrNoASHAPlan = errors.New("an asha job runs an asha plan (its GPU schedule): `rubberband plan` makes one")

// newASHA is the driver of an ASHA run: its stages are rungs (spec.ASHA.RungStages), every
// bracket's held at the first phase's GPUs on the default offer.
func newASHA(cfg Config, m *sim.Model, a spec.ASHA) (*run, error) {
	if cfg.ASHA == nil {
		return nil, ErrNoASHAPlan
	}
	p := *cfg.ASHA
	if err := m.CheckASHA(p); err != nil {
		return nil, fmt.Errorf("plan does not fit the spec: %w", err)
	}
	brackets := a.RungStages()
	plan := make(sim.Alloc, len(brackets))
	for b, br := range brackets {
		for range br.Stages {
			plan[b] = append(plan[b], sim.StageAlloc{GPUs: p.GPUs[0], Nodes: m.NodesFor(p.GPUs[0])})
		}
	}
	st := newState(cfg.Experiment, brackets, plan, cfg.Log)
	st.asha = &ashaState{plan: p, ladder: asha.New(a), index: map[string]int{}, rungEnd: map[stageKey]time.Time{}, promoted: map[stageKey][]string{}}
	return &run{cfg: cfg, clk: cfg.Clock, model: m, st: st, log: cfg.Log}, nil
}

// sampleASHA journals the trials not journaled yet, in the ladder's order (trial i in bracket
// i mod B), with their configurations unless the sampler draws them at launch.
func (x *run) sampleASHA() error {
	a := x.cfg.Experiment.Algorithm.ASHA
	brackets := max(a.Brackets, 1)
	x.mu.Lock()
	have := len(x.st.asha.byIndex)
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
		e := Event{Ev: EvTrial, Bracket: b, Trial: fmt.Sprintf("b%d-t%04d", b, i)}
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
	a := x.st.asha
	began := len(a.phaseAt) > 0
	x.mu.Unlock()
	if b := x.cfg.Experiment.Budget; b.MaxCostUSD > 0 {
		fmt.Fprintf(x.log, "asha: budget.max_cost_usd ($%.2f) is not forecast during an asha run: its plan was priced against it\n", b.MaxCostUSD)
	}
	if !began {
		if err := x.record(Event{Ev: EvPhase, Stage: 0, GPUs: a.plan.GPUs[0]}, true); err != nil {
			return err
		}
	}
	x.mu.Lock()
	gpus := a.plan.GPUs[len(a.phaseAt)-1]
	var jobs []job
	for _, j := range a.ladder.Jobs() {
		jobs = append(jobs, x.ashaJob(j))
	}
	x.mu.Unlock()
	nodes := x.model.NodesFor(gpus)
	if _, err := x.scaleTo(ctx, 0, nodes, nil); err != nil {
		return err
	}
	m := newStage(0, 1, gpus, nodes, x.cfg.TimeScale, x.cfg.MaxRetries, jobs, nil, true)
	if _, err := x.runJobs(ctx, 0, m, &ashaSource{x: x}, x.ashaProgress); err != nil {
		return err
	}
	_, err := x.scaleTo(ctx, 0, 0, nil)
	return err
}

// ashaJob is a ladder's job as the job loop runs it. Callers hold x.mu.
func (x *run) ashaJob(j asha.Job) job {
	st := x.st.brackets[j.Bracket].Stages[j.Rung]
	return job{trial: x.st.asha.byIndex[j.Trial], bracket: j.Bracket, k: j.Rung, st: st, budget: x.budget(st, x.st.plan[j.Bracket][j.Rung], 1)}
}

// ashaSource hands the job loop ASHA's jobs.
type ashaSource struct{ x *run }

var _ jobSource = (*ashaSource)(nil)

// more enters the phases the work that can still run now allows (once every trial started: the
// jobs in flight and the promotions waiting, at most the next phase's GPUs), then journals the
// jobs the ladder hands out, up to the phase's GPUs in flight.
func (s *ashaSource) more(int) (stageEvent, error) {
	x := s.x
	x.mu.Lock()
	a := x.st.asha
	phase, next := len(a.phaseAt)-1, len(a.phaseAt)-1
	if a.ladder.Started() >= x.cfg.Experiment.Algorithm.ASHA.Trials {
		demand := a.ladder.InFlight() + a.ladder.Promotable()
		for next+1 < len(a.plan.GPUs) && demand <= a.plan.GPUs[next+1] {
			next++
		}
	}
	x.mu.Unlock()
	for p := phase + 1; p <= next; p++ {
		fmt.Fprintf(x.log, "asha: phase %d of %d: %d GPUs\n", p+1, len(a.plan.GPUs), a.plan.GPUs[p])
		if err := x.record(Event{Ev: EvPhase, Stage: p, GPUs: a.plan.GPUs[p]}, true); err != nil {
			return stageEvent{}, err
		}
	}
	gpus := a.plan.GPUs[next]
	var jobs []job
	for {
		x.mu.Lock()
		j, ok := a.ladder.Peek()
		ok = ok && a.ladder.InFlight() < gpus
		var e Event
		if ok {
			e = Event{Ev: EvPromote, Bracket: j.Bracket, Stage: j.Rung, Trial: a.byIndex[j.Trial], Iter: j.To}
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
	done := a.ladder.Done()
	x.mu.Unlock()
	return stageEvent{kind: evWork, jobs: jobs, parallel: gpus, keep: x.model.NodesFor(gpus), exhausted: done}, nil
}

// ashaProgress tells Progress of a job done: its rung's results against the trials.
func (x *run) ashaProgress(k int) {
	if x.cfg.Progress == nil {
		return
	}
	x.mu.Lock()
	a := x.st.asha
	done := 0
	for b := range x.st.brackets {
		if k < len(x.st.brackets[b].Stages) {
			done += a.ladder.Results(b, k)
		}
	}
	elapsed := x.specDuration(x.clk.Now().Sub(x.st.start))
	x.mu.Unlock()
	x.cfg.Progress(Status{Bracket: "asha", Stage: k, Stages: len(x.st.brackets[0].Stages), Done: done,
		Total: x.cfg.Experiment.Algorithm.ASHA.Trials, Elapsed: elapsed, Cost: x.cost(x.clk.Now())})
}

// VerifyASHA audits an ASHA run's journal against the promotion rule itself: its results fed to
// a fresh ladder in journal order, every promotion must be the one the rule hands out at that
// point (none taken twice), and a finished run must leave the ladder done. It returns the
// winner the rule picks from those results: what the run must report.
func VerifyASHA(exp *spec.Experiment, events []Event) (best string, err error) {
	a := exp.Algorithm.ASHA
	if a == nil {
		return "", fmt.Errorf("verify asha: %s is not an asha job", exp.Name)
	}
	l := asha.New(*a)
	var byIndex []string
	index := map[string]int{}
	finished := false
	for i, e := range events {
		switch e.Ev {
		case EvTrial:
			index[e.Trial] = len(byIndex)
			byIndex = append(byIndex, e.Trial)
		case EvPromote:
			j, ok := l.Next()
			if !ok || byIndex[j.Trial] != e.Trial || j.Rung != e.Stage || j.Bracket != e.Bracket {
				want := "nothing"
				if ok {
					want = fmt.Sprintf("%s to bracket %d rung %d", byIndex[j.Trial], j.Bracket, j.Rung)
				}
				return "", fmt.Errorf("verify asha: record %d promotes %s to bracket %d rung %d; the rule hands out %s", i+1, e.Trial, e.Bracket, e.Stage, want)
			}
		case EvDone:
			if err := l.Report(index[e.Trial], search.Loss(metricOrNaN(e.Metric), exp.Objective.Mode)); err != nil {
				return "", fmt.Errorf("verify asha: record %d: %w", i+1, err)
			}
		case EvFail:
			if e.GaveUp {
				if err := l.Drop(index[e.Trial]); err != nil {
					return "", fmt.Errorf("verify asha: record %d: %w", i+1, err)
				}
			}
		case EvFinish:
			finished = true
		}
	}
	if finished && !l.Done() {
		return "", fmt.Errorf("verify asha: the run finished with its ladder not done (%d jobs in flight, %d of %d trials started)", l.InFlight(), l.Started(), a.Trials)
	}
	t, _, ok := l.Best()
	if !ok {
		return "", nil
	}
	return byIndex[t], nil
}
