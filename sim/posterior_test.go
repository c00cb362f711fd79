package sim

import (
	"math"
	"testing"
)

// The posterior mean is the profile's weighted as priorIters observations against the evidence;
// counts not observed move by the observed counts' factor; the start-up moves alike; no
// evidence changes nothing.
func TestPosteriorWorkedByHand(t *testing.T) {
	cluster := "{gpus_per_node: 1, price_per_hour: 3.6, max_nodes: 8}"
	profile := "{iter_latency: {1: {mean: 2, std: 0.2}, 2: {mean: 1.2, std: 0.1}, 4: {mean: 0.8, std: 0.05}}, startup_latency: {value: 10s}}"
	m := job(t, "{stages: [{trials: 1, iters: 1}]}", cluster, profile, 10, 1).Model()
	if p := m.Posterior(Evidence{}); p.IterLatency(2).Mean() != 1.2 || p.Startup.Mean() != 10 {
		t.Fatalf("no evidence moved the model: %v, %v", p.IterLatency(2).Mean(), p.Startup.Mean())
	}
	// 15 iterations at 1 GPU averaging 3 s; 3 start-ups averaging 20 s.
	p := m.Posterior(Evidence{Iter: map[IterKey]Observed{{0, 1}: {Sum: 45, N: 15}}, Startup: map[int]Observed{0: {Sum: 60, N: 3}}})
	f1 := (priorIters*2 + 45.0) / (priorIters + 15) / 2
	for _, c := range []struct {
		g    int
		want float64
	}{{1, 2 * f1}, {2, 1.2 * f1}, {4, 0.8 * f1}} {
		if got := p.IterLatency(c.g).Mean(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%d GPUs: %v, by hand %v", c.g, got, c.want)
		}
	}
	if got, want := p.IterFactor(m, 4), f1; math.Abs(got-want) > 1e-12 {
		t.Errorf("factor %v, want %v", got, want)
	}
	// The spread scales with the mean: the shape is the profile's.
	if got, want := p.IterLatency(1).Var(), 0.04*f1*f1; math.Abs(got-want) > 1e-12 {
		t.Errorf("variance %v, want %v", got, want)
	}
	if got, want := p.Startup.Mean(), (priorStartups*10+60)/float64(priorStartups+3); math.Abs(got-want) > 1e-12 {
		t.Errorf("start-up %v, by hand %v", got, want)
	}
	if m.IterLatency(1).Mean() != 2 || m.Startup.Mean() != 10 {
		t.Fatal("the prior changed")
	}
}

// A model with uncertainty spreads each stage's duration by a factor N(1, u) per sample: the
// mean stays, the standard deviation is u times it (constant latencies: nothing else varies).
func TestUncertaintySpreadsStages(t *testing.T) {
	s := job(t, "{stages: [{trials: 1, iters: 10}]}", "{gpus_per_node: 1, price_per_hour: 3.6, scale_latency: {value: 0s}, init_latency: {value: 0s}}",
		"{iter_latency: {1: {dist: constant, value: 1}}, startup_latency: {value: 0s}}", 20000, 5)
	s.Model().Uncertainty = 0.1
	res, err := s.Simulate(s.Model().Elastic([][]int{{1}}))
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Brackets[0].Stages[0]; math.Abs(d.Duration-10) > 0.05 || math.Abs(res.JCT.Std-1) > 0.05 {
		t.Fatalf("mean %v (10), std %v (1)", d.Duration, res.JCT.Std)
	}
}

// A spot offer's interruption rate moves to what the run saw, the spec's rate counting as the
// exposure in which it expects priorInterruptions interruptions (at most maxPriorExposure):
// worked by hand for a busy market, a calm one, one the spec gives no rate; lifetimes stay.
func TestPosteriorInterruptionRateByHand(t *testing.T) {
	const hour = 3600.0
	market := func(spot string) *Model {
		cluster := "{gpus_per_node: 1, price_per_hour: 3.6, markets: [on-demand, spot], spot: " + spot + "}"
		return job(t, "{stages: [{trials: 1, iters: 1}]}", cluster, spotByHandProfile, 10, 1).Model()
	}
	for _, tc := range []struct {
		name, spot string
		seen       Observed
		want       float64 // per node-hour
	}{
		// 5 an hour is worth 2 interruptions in 0.4 node-hours; none in 0.4 more halves it.
		{"busy market, calm run", "{discount: 0.5, interruptions_per_hour: 5}", Observed{Sum: 0, N: 0.4 * hour}, 2.5},
		// 0.1 an hour would be 20 node-hours: capped at 2 (0.2 interruptions); 14 in 2.8 more.
		{"calm market, busy run", "{discount: 0.5, interruptions_per_hour: 0.1}", Observed{Sum: 14, N: 2.8 * hour}, 14.2 / 4.8},
		// Never interrupted, by the spec: 2 node-hours of nothing; 3 in 2 more.
		{"no rate", "{discount: 0.5}", Observed{Sum: 3, N: 2 * hour}, 3 / 4.0},
	} {
		m := market(tc.spot)
		spot, _ := m.OfferIndex(StageAlloc{Market: "spot"})
		p := m.Posterior(Evidence{Interruptions: map[int]Observed{spot: tc.seen}})
		if got := p.Offers[spot].Spot.Rate * hour; math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v an hour, by hand %v", tc.name, got, tc.want)
		}
		if prior := m.Offers[spot].Spot; prior != nil && prior.Rate*hour == tc.want {
			t.Errorf("%s: the prior moved", tc.name)
		}
	}
	// Lifetimes (drawn afresh at each node's start) are no rate: what nodes held shorter than
	// one saw says nothing of them, and they stay.
	m := market("{discount: 0.5, lifetimes: {value: 30m}}")
	spot, _ := m.OfferIndex(StageAlloc{Market: "spot"})
	p := m.Posterior(Evidence{Interruptions: map[int]Observed{spot: {Sum: 0, N: 2 * hour}}})
	if got := p.Offers[spot].Spot.Lifetimes.Mean(); got != 30*60 {
		t.Errorf("lifetimes %v s, want the spec's 1800 s", got)
	}
}
