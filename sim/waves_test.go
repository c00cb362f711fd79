package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// meanSD are a sample's mean and standard deviation.
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// quantile is the q-quantile of xs (sorted in place).
func quantile(xs []float64, q float64) float64 {
	slices.Sort(xs)
	return xs[int(q*float64(len(xs)-1))]
}

// Drawn by its slowest chain, a stage takes what it takes trial by trial: mean and p95 within
// their Monte Carlo error, over stages of one wave and of many, chains of equal length and not,
// normal and constant start-ups, iterations of one GPU and interpolated between two.
func TestChainsAgreeWithTrialByTrial(t *testing.T) {
	const samples = 4000
	for _, c := range []struct {
		stage, profile string
		gpus           int
	}{
		{"{trials: 64, iters: 3}", "{iter_latency: {1: {dist: normal, mean: 4, std: 0.7}}}", 8},
		{"{trials: 1000, iters: 1}", "{iter_latency: {1: {dist: normal, mean: 4, std: 0.7}}}", 1000}, // a trial a slot
		{"{trials: 100, iters: 2}", "{iter_latency: {1: {dist: normal, mean: 4, std: 0.7}}}", 7},     // chains of 14 and 15
		{"{trials: 300, iters: 40}", "{iter_latency: {1: {dist: normal, mean: 1, std: 0.3}}, startup_latency: {dist: normal, mean: 20, std: 3}}", 64},
		{"{trials: 16, iters: 5}", "{iter_latency: {1: {dist: normal, mean: 4, std: 0.5}, 4: {dist: normal, mean: 1.2, std: 0.2}}}", 48}, // 3 GPUs a trial: interpolated
	} {
		t.Run(fmt.Sprintf("%s on %d GPUs", c.stage, c.gpus), func(t *testing.T) {
			alg := fmt.Sprintf("{stages: [%s]}", c.stage)
			cluster := fmt.Sprintf("{gpus_per_node: %d, price_per_hour: 1}", c.gpus)
			fast := job(t, alg, cluster, c.profile, samples, 1)
			exact := job(t, alg, cluster, c.profile, samples, 2)
			exact.DrawTrialByTrial()
			a := StageAlloc{GPUs: c.gpus, Nodes: 1}
			if _, ok := stageByChains(fast.m.Offers[0], fast.brackets[0].Stages[0], a); !ok {
				t.Fatal("the stage's chains should be normal")
			}
			got, want := fast.trainPart(0, 0, a).dur, exact.trainPart(0, 0, a).dur
			mg, sg := meanSD(got)
			mw, sw := meanSD(want)
			if se := math.Hypot(sg, sw) / math.Sqrt(samples); math.Abs(mg-mw) > 4*se {
				t.Errorf("mean %.3f by chains, %.3f trial by trial (4 standard errors: %.3f)", mg, mw, 4*se)
			}
			// p95's standard error: sqrt(p(1-p)/n)/density, the density of a normal there ~0.103/sd.
			pg, pw := quantile(got, 0.95), quantile(want, 0.95)
			if se := math.Sqrt(0.95*0.05/samples) / (0.103 / sw); math.Abs(pg-pw) > 4*math.Sqrt2*se {
				t.Errorf("p95 %.3f by chains, %.3f trial by trial (4 standard errors: %.3f)", pg, pw, 4*math.Sqrt2*se)
			}
		})
	}
}

// A stage whose chains are too short for the central limit, and not normal, is drawn trial by
// trial.
func TestShortLognormalChainsAreDrawnTrialByTrial(t *testing.T) {
	s := job(t, "{stages: [{trials: 64, iters: 3}]}", "{gpus_per_node: 8, price_per_hour: 1}",
		"{iter_latency: {1: {dist: lognormal, mean: 4, std: 1}}}", 10, 1)
	if _, ok := stageByChains(s.m.Offers[0], s.brackets[0].Stages[0], StageAlloc{GPUs: 8, Nodes: 1}); ok {
		t.Error("chains of 24 lognormal iterations were taken as normal")
	}
	if _, ok := stageByChains(s.m.Offers[0], s.brackets[0].Stages[0], StageAlloc{GPUs: 2, Nodes: 1}); !ok {
		t.Error("chains of 96 iterations were not taken as normal (the central limit)")
	}
	if s.DrawnTrials() != 64 {
		t.Errorf("DrawnTrials %d, want the stage's 64", s.DrawnTrials())
	}
}

// The largest of k draws, from the order statistic, is the largest of k draws made one by one:
// means within their Monte Carlo error, for each distribution maxOf knows, and k from 1 to 500.
func TestMaxOfAgreesWithDrawsOneByOne(t *testing.T) {
	const samples = 20000
	for _, d := range []Dist{Constant(7), NewTruncNormal(30, 6), NewTruncNormal(1, 2), NewLogNormal(60, 20),
		Uniform{Lo: 10, Hi: 50}, Scaled{Base: NewLogNormal(60, 20), Factor: 0.5}} {
		for _, k := range []int{1, 3, 40, 500} {
			r1, r2 := rand.New(rand.NewPCG(1, uint64(k))), rand.New(rand.NewPCG(2, uint64(k)))
			got, want := make([]float64, samples), make([]float64, samples)
			for i := range samples {
				got[i], _ = maxOf(d, k, r1)
				for range k {
					want[i] = max(want[i], d.Sample(r2))
				}
			}
			mg, sg := meanSD(got)
			mw, sw := meanSD(want)
			if se := math.Hypot(sg, sw) / math.Sqrt(samples); math.Abs(mg-mw) > 4*se+1e-9 {
				t.Errorf("%T %v, k=%d: mean max %.4f at once, %.4f one by one (4 standard errors: %.4f)", d, d, k, mg, mw, 4*se)
			}
		}
	}
	if knowsMax(Empirical{Values: []float64{1, 2}}) {
		t.Error("maxOf claims an empirical distribution")
	}
}
