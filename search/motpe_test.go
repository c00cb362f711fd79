package search

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/spec"
)

// zdt1 is Zitzler, Deb and Thiele's first problem in two parameters: both losses in conflict
// along the front f2 = 1 - sqrt(f1) (y = 0).
func zdt1(c spec.Config) []float64 {
	x, y := c["x"].(float64), c["y"].(float64)
	g := 1 + 9*y
	return []float64{x, g * (1 - math.Sqrt(x/g))}
}

var zdtSpace = map[string]spec.Param{"x": {Type: "uniform", Min: 0, Max: 1}, "y": {Type: "uniform", Min: 0, Max: 1}}

// searchZDT draws n configurations, tpe or random, learning from two-objective results, and
// returns the hypervolume of what it found (reference point (1.1, 11)).
func searchZDT(seed int64, n int, tpe bool) float64 {
	sampler := NewTPE(zdtSpace, tpeOptions(3))
	var history []Observation
	var found [][]float64
	for i := range n {
		r := TrialRand(seed, i)
		var c spec.Config
		if tpe {
			c = sampler.Draw(i, history, r)
		} else {
			c = spec.SampleConfig(zdtSpace, r)
		}
		losses := zdt1(c)
		history = append(history, Observation{Params: c, Budget: 1, Loss: losses[0], Losses: losses})
		found = append(found, losses)
	}
	return pareto.Hypervolume(found, []float64{1.1, 11})
}

// On two objectives, tpe (MOTPE's split by non-domination) finds a larger hypervolume than
// random search with the same evaluations, in the median of ten seeds.
func TestMOTPEBeatsRandomOnZDT1(t *testing.T) {
	var withTPE, random []float64
	for seed := range int64(10) {
		withTPE = append(withTPE, searchZDT(seed, 80, true))
		random = append(random, searchZDT(seed, 80, false))
	}
	slices.Sort(withTPE)
	slices.Sort(random)
	t.Logf("hypervolume medians: tpe %.3f, random %.3f", withTPE[5], random[5])
	if withTPE[5] <= random[5] {
		t.Fatalf("median hypervolume %.3f with tpe, %.3f at random", withTPE[5], random[5])
	}
}

// With constraints, a feasible result ranks before every infeasible one, however good its
// losses: the infeasible best of every objective is never among the good.
func TestParetoRankedPutsTheFeasibleFirst(t *testing.T) {
	history := []Observation{
		{Budget: 1, Losses: []float64{0, 0}, Violation: 1}, // the best, infeasible
		{Budget: 1, Losses: []float64{5, 5}},
		{Budget: 1, Losses: []float64{4, 6}},
		{Budget: 1, Losses: []float64{9, 9}},
		{Budget: 3, Losses: []float64{1, 1}},
	}
	ranked := paretoRanked(history)
	if ranked[0].Loss != 3 || ranked[3].Loss != 2 || ranked[4].Loss != 0 || ranked[1].Loss > 1 || ranked[2].Loss > 1 {
		t.Fatalf("ranked losses %v", []float64{ranked[0].Loss, ranked[1].Loss, ranked[2].Loss, ranked[3].Loss, ranked[4].Loss})
	}
	if history[0].Loss != 0 {
		t.Fatal("the caller's history was changed")
	}
	one := []Observation{{Budget: 1, Loss: 3}, {Budget: 1, Loss: 1}}
	if got := paretoRanked(one); got[0].Loss != 3 || got[1].Loss != 1 {
		t.Fatalf("one objective: %v", got)
	}
}

// The same history and generator give the same draw.
func TestMOTPEIsDeterministic(t *testing.T) {
	sampler := NewTPE(zdtSpace, tpeOptions(3))
	var history []Observation
	for i := range 60 {
		c := spec.SampleConfig(zdtSpace, TrialRand(1, i))
		l := zdt1(c)
		history = append(history, Observation{Params: c, Budget: 1, Loss: l[0], Losses: l})
	}
	a := sampler.Draw(100, history, rand.New(rand.NewPCG(1, 2)))
	b := NewTPE(zdtSpace, tpeOptions(3)).Draw(100, history, rand.New(rand.NewPCG(1, 2)))
	if a["x"] != b["x"] || a["y"] != b["y"] {
		t.Fatalf("%v then %v", a, b)
	}
}

// BenchmarkMOTPEDraw1000 fits on 1,000 two-objective results and draws (issue 41: under 10 ms).
func BenchmarkMOTPEDraw1000(b *testing.B) { benchmarkDraw(b, true, false) }

// benchmarkDraw times tpe's draw after 1,000 zdt1 results: both losses (several) or the first,
// with one joint density (multivariate) or one per parameter.
func benchmarkDraw(b *testing.B, several, multivariate bool) {
	var history []Observation
	for i := range 1000 {
		c := spec.SampleConfig(zdtSpace, TrialRand(2, i))
		l := zdt1(c)
		o := Observation{Params: c, Budget: 1, Loss: l[0]}
		if several {
			o.Losses = l
		}
		history = append(history, o)
	}
	opt := tpeOptions(3)
	opt.Multivariate = multivariate
	sampler := NewTPE(zdtSpace, opt)
	r := rand.New(rand.NewPCG(3, 4))
	for b.Loop() {
		sampler.Draw(1000, history, r)
	}
}

// BenchmarkMOTPEDrawMultivariate1000 is BenchmarkMOTPEDraw1000 with one joint density, the
// default with several objectives.
func BenchmarkMOTPEDrawMultivariate1000(b *testing.B) { benchmarkDraw(b, true, true) }

// BenchmarkTPEDraw1000 is BenchmarkMOTPEDraw1000 with the first loss alone: what the ranking by
// dominance adds.
func BenchmarkTPEDraw1000(b *testing.B) { benchmarkDraw(b, false, false) }
