package virtual_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/sim"
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
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	pred, err := sim.New(m, exp.Algorithm.Brackets(), 20000, 99).Simulate(alloc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := exp.Deadline.Seconds()
	missed, jct, cost := realize(t, runs, deadline, func(i int) virtual.Config {
		return virtual.Config{Experiment: exp, Alloc: alloc, Seed: int64(1000 + i), RunID: "calibration"}
	})
	lo, hi := sim.BinomialInterval(runs, sim.MissProb(pred.Outcome.JCT, deadline), 0.999)
	t.Logf("plan %v: %d of %d runs missed the %.0f s deadline (%.1f%%); predicted P(miss) %.1f%%, 99.9%% interval %d..%d; mean JCT %.1f s (predicted %.1f), cost $%.4f (predicted $%.4f)",
		alloc, missed, runs, deadline, 100*float64(missed)/float64(runs), 100*sim.MissProb(pred.Outcome.JCT, deadline), lo, hi, jct, pred.JCT.Mean, cost, pred.Cost.Mean)
	if missed < lo || missed > hi {
		t.Fatalf("%d of %d runs missed the deadline: outside %d..%d", missed, runs, lo, hi)
	}
}

// realize runs the configurations config(0..runs-1) in virtual time, each to its end with a
// journal of its own, and returns how many missed the deadline and the mean JCT and cost.
func realize(t *testing.T, runs int, deadline float64, config func(i int) virtual.Config) (missed int, jct, cost float64) {
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
	}
	return missed, jct, cost
}
