package virtual_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/sim"
)

// ASHA in virtual time: each calibration job's elastic ASHA plan runs a thousand times through
// the unchanged executor, each run's latencies drawn afresh. Its mean JCT and cost land within
// 5% of sim.SimulateASHA's prediction, and the share of runs that miss the deadline lies within
// the 99.9% binomial interval of the predicted P(miss): an executor whose promotions, phases or
// billing differed from the simulator's model would fall outside. The spot job's nodes are
// interrupted and some are slow; a model blind to either (as SimulateASHA was) must fall outside.
func TestASHACalibrationInVirtualTime(t *testing.T) {
	for _, file := range []string{"testdata/asha-calibration.yaml", "testdata/asha-calibration-spot.yaml"} {
		t.Run(filepath.Base(file), func(t *testing.T) { ashaCalibration(t, file) })
	}
}

func ashaCalibration(t *testing.T, file string) {
	runs := 1000
	if testing.Short() {
		runs = 200
	}
	base := planned(t, file)
	exp, p := base.Experiment, *base.ASHA
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GPUs) < 2 {
		t.Fatalf("the plan %v is not elastic: nothing to check its phases with", p)
	}
	pred, err := m.SimulateASHA(*exp.Algorithm.ASHA, p, 20000, 99)
	if err != nil {
		t.Fatal(err)
	}
	deadline := exp.Deadline.Seconds()
	missed, jct, cost, _ := realize(t, runs, deadline, func(i int) virtual.Config {
		// Other trials each run (the sampler's seed): the simulator's ranks are exchangeable
		// trials', not one draw of them.
		seed := int64(1000 + i)
		run := *exp
		run.Sampler.Seed = &seed
		return virtual.Config{Experiment: &run, ASHA: &p, Seed: seed, RunID: "asha-calibration"}
	})
	predJCT, predCost := mean(pred.JCT), mean(pred.Cost)
	lo, hi := sim.BinomialInterval(runs, sim.MissProb(pred.JCT, deadline), 0.999)
	t.Logf("plan %v: %d of %d runs missed the %.0f s deadline; predicted P(miss) %.1f%%, 99.9%% interval %d..%d; mean JCT %.1f s (predicted %.1f), cost $%.4f (predicted $%.4f)",
		p, missed, runs, deadline, 100*sim.MissProb(pred.JCT, deadline), lo, hi, jct, predJCT, cost, predCost)
	if math.Abs(jct/predJCT-1) > 0.05 || math.Abs(cost/predCost-1) > 0.05 {
		t.Fatalf("realized JCT %.1f s and cost $%.4f; predicted %.1f s and $%.4f: more than 5%% apart", jct, cost, predJCT, predCost)
	}
	if missed < lo || missed > hi {
		t.Fatalf("%d of %d runs missed the deadline: outside %d..%d", missed, runs, lo, hi)
	}
	if m.Spot == nil && m.SlowShare == 0 {
		return
	}
	m.Spot, m.SlowShare = nil, 0
	blind, err := m.SimulateASHA(*exp.Algorithm.ASHA, p, 20000, 99)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi = sim.BinomialInterval(runs, sim.MissProb(blind.JCT, deadline), 0.999)
	t.Logf("a model without spot or stragglers: P(miss) %.1f%% (interval %d..%d), JCT %.1f s, cost $%.4f", 100*sim.MissProb(blind.JCT, deadline), lo, hi, mean(blind.JCT), mean(blind.Cost))
	if missed >= lo && missed <= hi {
		t.Fatalf("a model without spot or stragglers predicts the misses too (%d in %d..%d): the job does not test them", missed, lo, hi)
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
