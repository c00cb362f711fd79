package objective

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Objective is one benchmark.
type Objective struct {
	Name string
	// Space is the search space it is defined on.
	Space map[string]spec.Param
	// Optimum is the lowest Final value over Space.
	Optimum float64
	// Value is the loss reported after iter of maxIter iterations (noisy for some).
	Value func(c spec.Config, iter, maxIter int) float64
	// Final is the noise-free loss at full fidelity: what regret is measured on.
	Final func(c spec.Config) float64
	// Multi, for a benchmark with several objectives, names and measures them (Value and Final
	// are then the first, Optimum its lowest on the true front); nil for one.
	Multi *Multi
	// IterTime, where set, is how long an iteration of a configuration takes relative to the
	// job's profile (its trials then cost unalike); nil: alike.
	IterTime func(c spec.Config) float64
}

// Names lists the benchmarks: the functions, digits, a network really trained, and those with
// several objectives.
func Names() []string {
	return append(append(Functions(), "digits"), MultiFunctions()...)
}

// Functions lists the benchmarks that are formulas: cheap to evaluate a million times.
func Functions() []string {
	names := []string{"branin", "hartmann6", "curves"}
	slices.Sort(names)
	return names
}

// Lookup returns the benchmark name.
func Lookup(name string) (Objective, error) {
	switch name {
	case "branin":
		return branin(), nil
	case "hartmann6":
		return hartmann6(), nil
	case "curves":
		return curves(), nil
	case "digits":
		return digits(), nil
	case "zdt1":
		return zdt1(), nil
	case "curves-latency":
		return curvesLatency(), nil
	}
	return Objective{}, fmt.Errorf("objective: no benchmark %q (%v)", name, Names())
}

func num(c spec.Config, name string) float64 {
	switch v := c[name].(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	case int:
		return float64(v)
	}
	return math.NaN()
}

// fidelity is iter/maxIter in (0, 1].
func fidelity(iter, maxIter int) float64 {
	if maxIter <= 0 {
		return 1
	}
	return min(max(float64(iter)/float64(maxIter), 0), 1)
}

// branin is the multi-fidelity Branin of Kandasamy et al. (2017), as the multi-fidelity
// literature uses it: the fidelity z bends b, c and t away from their values at z = 1, where it
// is Branin's function, minimal (0.397887) at three points.
func branin() Objective {
	f := func(x1, x2, z float64) float64 {
		b := 5.1/(4*math.Pi*math.Pi) - 0.01*(1-z)
		c := 5/math.Pi - 0.1*(1-z)
		t := 1/(8*math.Pi) + 0.05*(1-z)
		d := x2 - b*x1*x1 + c*x1 - 6
		return d*d + 10*(1-t)*math.Cos(x1) + 10
	}
	return Objective{
		Name:    "branin",
		Space:   map[string]spec.Param{"x1": {Type: "uniform", Min: -5, Max: 10}, "x2": {Type: "uniform", Min: 0, Max: 15}},
		Optimum: 0.397887357729738,
		Value: func(c spec.Config, iter, maxIter int) float64 {
			return f(num(c, "x1"), num(c, "x2"), fidelity(iter, maxIter))
		},
		Final: func(c spec.Config) float64 { return f(num(c, "x1"), num(c, "x2"), 1) },
	}
}

var (
	hartmannA = [4][6]float64{
		{10, 3, 17, 3.5, 1.7, 8},
		{0.05, 10, 17, 0.1, 8, 14},
		{3, 3.5, 1.7, 10, 17, 8},
		{17, 8, 0.05, 10, 0.1, 14},
	}
	hartmannP = [4][6]float64{
		{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
		{0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
		{0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
		{0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381},
	}
	hartmannAlpha = [4]float64{1.0, 1.2, 3.0, 3.2}
)

// hartmann6 is the multi-fidelity Hartmann-6 of Kandasamy et al. (2017): alpha lowered by
// 0.1(1-z) at fidelity z; at z = 1 the Hartmann function, minimal (-3.32237) near
// (0.20169, 0.15001, 0.47687, 0.27533, 0.31165, 0.6573).
func hartmann6() Objective {
	space := map[string]spec.Param{}
	for i := 1; i <= 6; i++ {
		space[fmt.Sprintf("x%d", i)] = spec.Param{Type: "uniform", Min: 0, Max: 1}
	}
	f := func(c spec.Config, z float64) float64 {
		var sum float64
		for i := range 4 {
			var inner float64
			for j := range 6 {
				d := num(c, fmt.Sprintf("x%d", j+1)) - hartmannP[i][j]
				inner += hartmannA[i][j] * d * d
			}
			sum += (hartmannAlpha[i] - 0.1*(1-z)) * math.Exp(-inner)
		}
		return -sum
	}
	return Objective{
		Name:    "hartmann6",
		Space:   space,
		Optimum: -3.32236801141551,
		Value:   func(c spec.Config, iter, maxIter int) float64 { return f(c, fidelity(iter, maxIter)) },
		Final:   func(c spec.Config) float64 { return f(c, 1) },
	}
}

// curves is a noisy learning curve of a model trained with interacting and conditional
// hyperparameters: an optimizer (sgd, whose momentum is conditional, or adam, whose beta1 is),
// a learning rate whose best value depends on the optimizer and the batch size, dropout whose
// best value grows with depth, and depth. The loss falls from 2.5 towards its final value at a
// speed set by the learning rate, so early results rank configurations imperfectly; each report
// carries noise (0.03 at the start, shrinking to 0.005), deterministic per configuration and
// iteration. Its minimum at full fidelity, 0.05 + 2.45e^-8, is reached with sgd at momentum
// 0.9, lr 0.1·sqrt(batch/128), dropout 0.1·layers, layers 4 (learning rates below 0.01 have not
// converged by the end).
func curves() Objective {
	space := map[string]spec.Param{
		"optimizer": {Type: "choice", Values: []any{"sgd", "adam"}},
		"momentum":  {Type: "uniform", Min: 0, Max: 0.99, When: map[string]spec.AnyOf{"optimizer": {"sgd"}}},
		"beta1":     {Type: "uniform", Min: 0.5, Max: 0.999, When: map[string]spec.AnyOf{"optimizer": {"adam"}}},
		"lr":        {Type: "loguniform", Min: 1e-5, Max: 1},
		"batch":     {Type: "int", Min: 16, Max: 512},
		"dropout":   {Type: "uniform", Min: 0, Max: 0.8},
		"layers":    {Type: "int", Min: 1, Max: 8},
	}
	speed := func(c spec.Config) float64 { return 8 * min(1, math.Pow(num(c, "lr")/0.01, 0.3)) } // slow rates converge slowly
	asymptote := func(c spec.Config) float64 {
		lr, batch, dropout, layers := num(c, "lr"), num(c, "batch"), num(c, "dropout"), num(c, "layers")
		best := 0.1 * math.Sqrt(batch/128) // sgd's best learning rate
		loss := 0.05
		if c["optimizer"] == "adam" {
			best = 0.001 * math.Sqrt(batch/128)
			b1 := num(c, "beta1")
			loss += 0.04 + 2*(b1-0.9)*(b1-0.9)
		} else {
			m := num(c, "momentum")
			loss += 0.6 * (m - 0.9) * (m - 0.9)
		}
		d := math.Log10(lr) - math.Log10(best)
		loss += 0.08 * d * d
		loss += 1.5 * (dropout - 0.1*layers) * (dropout - 0.1*layers)
		loss += 0.01 * (layers - 4) * (layers - 4)
		return loss
	}
	curve := func(c spec.Config, z float64) float64 { return asymptote(c) + 2.45*math.Exp(-speed(c)*z) }
	return Objective{
		Name:    "curves",
		Space:   space,
		Optimum: 0.05 + 2.45*math.Exp(-8),
		Value: func(c spec.Config, iter, maxIter int) float64 {
			z := fidelity(iter, maxIter)
			return curve(c, z) + (0.005+0.025*(1-z))*noiseOf(c, iter)
		},
		Final: func(c spec.Config) float64 { return curve(c, 1) },
	}
}

// noiseOf is a standard normal draw fixed by the configuration and the iteration.
func noiseOf(c spec.Config, iter int) float64 {
	h := fnv.New64a()
	for _, k := range slices.Sorted(mapsKeys(c)) {
		fmt.Fprintf(h, "%s=%v;", k, c[k])
	}
	return rand.New(rand.NewPCG(h.Sum64(), uint64(iter))).NormFloat64()
}

func mapsKeys(c spec.Config) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range c {
			if !yield(k) {
				return
			}
		}
	}
}
