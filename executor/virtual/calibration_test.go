package virtual_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Calibration in virtual time: the calibration job's plan is run a thousand times through the
// unchanged executor, each run's latencies drawn afresh (another world seed), the plan kept. The
// share of runs that miss the deadline lies within the 99.9% binomial interval of the plan's
// predicted P(miss) (from many more simulated runs than the planner used): a simulator whose
// model of the run differed from what the executor does — its waves, its scale-ups, its
// billing — would fall outside it.
func TestCalibrationInVirtualTime(t *testing.T) {
	runs := 1000
	if testing.Short() {
		runs = 200
	}
	exp, alloc, _ := plan(t, "testdata/calibration.yaml")
	pred := predict(t, exp, alloc)
	deadline := exp.Deadline.Seconds()
	missed, jct, cost, _ := realize(t, runs, deadline, func(i int) virtual.Config {
		return virtual.Config{Experiment: exp, Alloc: alloc, Seed: int64(1000 + i), RunID: "calibration"}
	})
	lo, hi := sim.BinomialInterval(runs, sim.MissProb(pred.Outcome.JCT, deadline), 0.999)
	t.Logf("plan %v: %d of %d runs missed the %.0f s deadline (%.1f%%); predicted P(miss) %.1f%%, 99.9%% interval %d..%d; mean JCT %.1f s (predicted %.1f), cost $%.4f (predicted $%.4f)",
		alloc, missed, runs, deadline, 100*float64(missed)/float64(runs), 100*sim.MissProb(pred.Outcome.JCT, deadline), lo, hi, jct, pred.JCT.Mean, cost, pred.Cost.Mean)
	if missed < lo || missed > hi {
		t.Fatalf("%d of %d runs missed the deadline: outside %d..%d", missed, runs, lo, hi)
	}
}

// Spot calibration in virtual time: a job on spot nodes interrupted 40 times an hour each
// (testdata/spot-40.yaml, at 8, 8, 4 and 2 GPUs) is run a thousand times through the unchanged
// executor, the world's interruptions drawn afresh each run. The mean JCT and cost land within
// 5% of the simulator's prediction, and the nodes lost per run within 10% of the interruptions
// it expects: a model that missed the nodes lost while they start or idle (as it did) expects
// a fifth fewer.
func TestSpotCalibrationInVirtualTime(t *testing.T) {
	runs := 1000
	if testing.Short() {
		runs = 200
	}
	exp, err := spec.Load("testdata/spot-40.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	alloc := m.Elastic([][]int{{8, 8, 4, 2}})
	pred, err := sim.New(m, exp.Algorithm.Brackets(), 20000, 99).Simulate(alloc)
	if err != nil {
		t.Fatal(err)
	}
	expected := 0.0
	for _, st := range pred.Brackets[0].Stages {
		expected += st.Interruptions
	}
	_, jct, cost, perRun := realize(t, runs, exp.Deadline.Seconds(), func(i int) virtual.Config {
		return virtual.Config{Experiment: exp, Alloc: alloc, Seed: int64(1000 + i), RunID: "spot-calibration"}
	})
	t.Logf("mean JCT %.1f s (predicted %.1f), cost $%.4f (predicted $%.4f); %.3f nodes lost a run (%.3f interruptions expected)",
		jct, pred.JCT.Mean, cost, pred.Cost.Mean, perRun, expected)
	if math.Abs(jct/pred.JCT.Mean-1) > 0.05 || math.Abs(cost/pred.Cost.Mean-1) > 0.05 || math.Abs(perRun/expected-1) > 0.1 {
		t.Fatalf("realized JCT %.1f s, cost $%.4f, %.3f nodes lost a run; predicted %.1f s, $%.4f, %.3f", jct, cost, perRun, pred.JCT.Mean, pred.Cost.Mean, expected)
	}
}

// predict is the simulator's prediction of alloc, from many more samples than a planner draws.
func predict(t *testing.T, exp *spec.Experiment, alloc sim.Alloc) sim.Result {
	t.Helper()
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := sim.New(m, exp.Algorithm.Brackets(), 20000, 99).Simulate(alloc)
	if err != nil {
		t.Fatal(err)
	}
	return pred
}

// realize runs the configurations config(0..runs-1) in virtual time, each to its end with a
// journal of its own, and returns how many missed the deadline, the mean JCT and cost, and the
// mean number of spot nodes lost.
func realize(t *testing.T, runs int, deadline float64, config func(i int) virtual.Config) (missed int, jct, cost, lost float64) {
	t.Helper()
	for i := range runs {
		cfg := config(i)
		cfg.Journal = filepath.Join(t.TempDir(), "journal.jsonl")
		out, err := virtual.Run(context.Background(), cfg)
		if err != nil || !out.Result.Finished {
			t.Fatalf("run %d: %v", i, err)
		}
		if out.Result.Realized.JCT > deadline {
			missed++
		}
		jct += out.Result.Realized.JCT / float64(runs)
		cost += out.Result.Realized.Cost / float64(runs)
		for _, in := range out.Result.Interruptions {
			lost += float64(len(in.Nodes)) / float64(runs)
		}
	}
	return missed, jct, cost, lost
}
