package objective

import (
	"fmt"
	"math"

	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Multi is what a benchmark with several objectives adds: their names and losses (all
// minimised), and how a front is measured, by its hypervolume from Reference. A front's regret
// is MaxHypervolume, that of the true front, minus its own.
type Multi struct {
	Metrics []string
	// Losses are the losses reported after iter of maxIter iterations, in Metrics' order.
	Losses func(c spec.Config, iter, maxIter int) []float64
	// Finals are the noise-free losses at full fidelity: what a front is measured on.
	Finals         func(c spec.Config) []float64
	Reference      []float64
	MaxHypervolume float64
}

// MultiFunctions lists the benchmarks with several objectives.
func MultiFunctions() []string { return []string{"curves-latency", "zdt1"} }

// Regret is how much hypervolume the front of finals (each a configuration's Finals) lacks.
func (m *Multi) Regret(finals [][]float64) float64 {
	return m.MaxHypervolume - pareto.Hypervolume(finals, m.Reference)
}

// multi makes an Objective of m: Value and Final are its first loss, Optimum the first loss's
// lowest on the true front (lowest).
func multi(name string, space map[string]spec.Param, lowest float64, m *Multi) Objective {
	return Objective{
		Name: name, Space: space, Optimum: lowest, Multi: m,
		Value: func(c spec.Config, iter, maxIter int) float64 { return m.Losses(c, iter, maxIter)[0] },
		Final: func(c spec.Config) float64 { return m.Finals(c)[0] },
	}
}

// zdt1 is ZDT1 (Zitzler, Deb and Thiele 2000) on six variables in [0, 1] with a fidelity, in the
// manner of Kandasamy et al.'s multi-fidelity functions: at fidelity z the distance function g
// measures the variables x2..x6 from 0.2(1-z) instead of 0, so that early results point a little
// away from the front. f1 = x1 (known at once, as a model's size is); f2 = g(1 - sqrt(f1/g)).
// At z = 1 it is ZDT1, whose front is f2 = 1 - sqrt(f1) (x2..x6 = 0); from the reference point
// (11, 11) that BoTorch's ZDT problems use, the front's hypervolume is 121 - 1/3.
func zdt1() Objective {
	const n = 6
	space := map[string]spec.Param{}
	for i := 1; i <= n; i++ {
		space[fmt.Sprintf("x%d", i)] = spec.Param{Type: "uniform", Min: 0, Max: 1}
	}
	f := func(c spec.Config, z float64) []float64 {
		shift := 0.2 * (1 - z)
		var sum float64
		for i := 2; i <= n; i++ {
			sum += math.Abs(num(c, fmt.Sprintf("x%d", i)) - shift)
		}
		g := 1 + 9*sum/(n-1)
		f1 := num(c, "x1")
		return []float64{f1, g * (1 - math.Sqrt(f1/g))}
	}
	return multi("zdt1", space, 0, &Multi{
		Metrics:        []string{"f1", "f2"},
		Losses:         func(c spec.Config, iter, maxIter int) []float64 { return f(c, fidelity(iter, maxIter)) },
		Finals:         func(c spec.Config) []float64 { return f(c, 1) },
		Reference:      []float64{11, 11},
		MaxHypervolume: 121 - 1.0/3,
	})
}

// curvesLatency is curves' loss against the inference latency of the model's depth, 1 + layers
// milliseconds (known at once): the deeper model is slower, and past four layers also worse, so
// the true front is the best loss at each depth from one to four, 0.05 + 0.01(layers-4)² +
// 2.45e^-8 (curves' optimum with that depth's dropout). Hypervolume is measured from (1, 10).
// An epoch takes sqrt(128/batch) of the profile's time (fewer, larger steps; about 0.85 on
// average over the space): curves' loss does not depend on the batch once the learning rate
// follows it, so a configuration as good and cheaper to train is there to find when cost_usd is
// an objective.
func curvesLatency() Objective {
	c := curves()
	latency := func(cfg spec.Config) float64 { return 1 + num(cfg, "layers") }
	var front [][]float64
	for layers := 1.0; layers <= 4; layers++ {
		front = append(front, []float64{c.Optimum + 0.01*(layers-4)*(layers-4), 1 + layers})
	}
	ref := []float64{1, 10}
	o := multi("curves-latency", c.Space, c.Optimum, &Multi{
		Metrics: []string{"loss", "latency_ms"},
		Losses: func(cfg spec.Config, iter, maxIter int) []float64 {
			return []float64{c.Value(cfg, iter, maxIter), latency(cfg)}
		},
		Finals:         func(cfg spec.Config) []float64 { return []float64{c.Final(cfg), latency(cfg)} },
		Reference:      ref,
		MaxHypervolume: pareto.Hypervolume(front, ref),
	})
	o.IterTime = func(cfg spec.Config) float64 { return math.Sqrt(128 / num(cfg, "batch")) }
	return o
}
