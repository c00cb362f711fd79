package virtual_test

import (
	"context"
	"math"
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
	missed, jct, cost := 0, 0.0, 0.0
	for i := range runs {
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Seed: int64(1000 + i),
			Journal: filepath.Join(t.TempDir(), "journal.jsonl"), RunID: "calibration"})
		if err != nil || !out.Result.Finished {
			t.Fatalf("run %d: %v", i, err)
		}
		if out.Result.Realized.JCT > deadline {
			missed++
		}
		jct += out.Result.Realized.JCT / float64(runs)
		cost += out.Result.Realized.Cost / float64(runs)
	}
	lo, hi := binomialInterval(runs, sim.MissProb(pred.Outcome.JCT, deadline), 0.999)
	t.Logf("plan %v: %d of %d runs missed the %.0f s deadline (%.1f%%); predicted P(miss) %.1f%%, 99.9%% interval %d..%d; mean JCT %.1f s (predicted %.1f), cost $%.4f (predicted $%.4f)",
		alloc, missed, runs, deadline, 100*float64(missed)/float64(runs), 100*sim.MissProb(pred.Outcome.JCT, deadline), lo, hi, jct, pred.JCT.Mean, cost, pred.Cost.Mean)
	if missed < lo || missed > hi {
		t.Fatalf("%d of %d runs missed the deadline: outside %d..%d", missed, runs, lo, hi)
	}
}

// binomialInterval is the central interval [lo, hi] of Binomial(n, p) holding at least conf of
// its mass: each tail outside it holds at most (1 - conf) / 2.
func binomialInterval(n int, p, conf float64) (lo, hi int) {
	pmf := func(k int) float64 {
		lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
		switch {
		case p <= 0:
			return map[bool]float64{true: 1}[k == 0]
		case p >= 1:
			return map[bool]float64{true: 1}[k == n]
		}
		return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p))
	}
	tail := (1 - conf) / 2
	for below := 0.0; lo <= n && below+pmf(lo) <= tail; lo++ {
		below += pmf(lo)
	}
	hi = n
	for above := 0.0; hi >= 0 && above+pmf(hi) <= tail; hi-- {
		above += pmf(hi)
	}
	return lo, hi
}

// The interval by hand: Binomial(20, 0.8) puts 0.010% at or below 8 and 0.056% at or below 9
// (more than the 0.05% a tail may hold), and 1.2% at 20, so 99.9% of it lies in 9..20.
func TestBinomialInterval(t *testing.T) {
	if lo, hi := binomialInterval(20, 0.8, 0.999); lo != 9 || hi != 20 {
		t.Fatalf("%d..%d", lo, hi)
	}
	if lo, hi := binomialInterval(100, 0.5, 0.95); lo != 40 || hi != 60 {
		t.Fatalf("%d..%d", lo, hi)
	}
}
