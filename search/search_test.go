package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

func tpeOptions(minPoints int) spec.Sampler {
	f := 0.0
	return spec.Sampler{Name: spec.SamplerTPE, MinPoints: minPoints, RandomFraction: &f, Candidates: 64,
		TopFraction: 0.15, BandwidthFactor: 3, MinBandwidth: 1e-3}
}

// On a 1-D quadratic, TPE's draws concentrate at the optimum as results accumulate: the last
// draws are much closer to it than uniform draws are, and the good density's points lie there.
func TestTPEConcentratesOnAQuadratic(t *testing.T) {
	for _, multivariate := range []bool{false, true} {
		t.Run(fmt.Sprintf("multivariate=%v", multivariate), func(t *testing.T) {
			opt := tpeOptions(2)
			opt.Multivariate = multivariate
			concentrates(t, opt)
		})
	}
}

func concentrates(t *testing.T, opt spec.Sampler) {
	space := map[string]spec.Param{"x": {Type: "uniform", Min: -10, Max: 10}}
	const optimum = 3.0
	tpe := NewTPE(space, opt)
	r := rand.New(rand.NewPCG(1, 2))
	var history []Observation
	var last []float64
	for i := range 120 {
		c := tpe.Draw(i, history, r)
		x := c["x"].(float64)
		history = append(history, Observation{Params: c, Budget: 1, Loss: (x - optimum) * (x - optimum)})
		if i >= 100 {
			last = append(last, math.Abs(x-optimum))
		}
	}
	sort.Float64s(last)
	median := last[len(last)/2]
	// Uniform on [-10, 10] is 5.5 from 3 at the median; TPE should be within a few tenths.
	if median > 0.5 {
		t.Fatalf("median distance of TPE's last 20 draws from the optimum is %.3f (uniform: about 5.5)", median)
	}
	m := tpe.fit(history)
	for _, p := range m.good.points {
		x := -10 + 20*p[0]
		if math.Abs(x-optimum) > 1 {
			t.Errorf("a point of the good density lies at %.3f, more than 1 from the optimum %v", x, optimum)
		}
	}
}

// Without enough results at any budget, TPE draws at random: exactly the draws of the random
// sampler from the same stream after the coin.
func TestTPEDrawsAtRandomUntilABudgetHasEnoughResults(t *testing.T) {
	space := map[string]spec.Param{"x": {Type: "uniform", Min: 0, Max: 1}, "k": {Type: "choice", Values: []any{"a", "b"}}}
	tpe := NewTPE(space, tpeOptions(3))
	history := []Observation{{Params: spec.Config{"x": 0.5, "k": "a"}, Budget: 1, Loss: 1}}
	for i := range 5 { // 5 < 2 * min_points at budget 2
		history = append(history, Observation{Params: spec.Config{"x": float64(i) / 5, "k": "b"}, Budget: 2, Loss: float64(i)})
	}
	if b, n := tpe.Budget(history); n != 0 {
		t.Fatalf("budget %d with %d results fitted; none has 6", b, n)
	}
	r1, r2 := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	got := tpe.Draw(10, history, r1)
	r2.Float64() // the coin
	if want := spec.SampleConfig(space, r2); !reflect.DeepEqual(got, want) {
		t.Fatalf("draw %v, want the random draw %v", got, want)
	}
	history = append(history, Observation{Params: spec.Config{"x": 0.9, "k": "a"}, Budget: 2, Loss: 9})
	if b, n := tpe.Budget(history); b != 2 || n != 6 {
		t.Fatalf("fitted on budget %d with %d results, want budget 2 with 6", b, n)
	}
}

// The model is fitted on the largest budget with enough results, not the one with the most.
func TestTPEFitsTheLargestBudgetWithEnoughResults(t *testing.T) {
	space := map[string]spec.Param{"x": {Type: "uniform", Min: 0, Max: 1}}
	tpe := NewTPE(space, tpeOptions(2))
	var history []Observation
	add := func(budget, n int) {
		for i := range n {
			history = append(history, Observation{Params: spec.Config{"x": float64(i) / float64(n)}, Budget: budget, Loss: float64(i)})
		}
	}
	add(1, 40)
	add(3, 4)
	add(9, 3)
	if b, n := tpe.Budget(history); b != 3 || n != 4 {
		t.Fatalf("budget %d (%d results), want 3 (4 results): 9 has 3 < 4, 3 is the largest with enough", b, n)
	}
}

// A sampler kept from draw to draw, its configurations cached by trial, draws what one made
// afresh for each draw does: the cache changes the time, never the draw.
func TestTPEKeptDrawsAsAFreshOne(t *testing.T) {
	space := map[string]spec.Param{
		"lr":    {Type: "loguniform", Min: 1e-4, Max: 1},
		"units": {Type: "int", Min: 8, Max: 512},
		"act":   {Type: "choice", Values: []any{"relu", "tanh", "gelu"}},
		"mom":   {Type: "uniform", Min: 0, Max: 1, When: map[string]spec.AnyOf{"act": {"relu"}}},
	}
	kept := NewTPE(space, tpeOptions(3))
	var history []Observation
	for i := range 120 {
		got := kept.Draw(i, history, TrialRand(9, i))
		if want := NewTPE(space, tpeOptions(3)).Draw(i, history, TrialRand(9, i)); !reflect.DeepEqual(got, want) {
			t.Fatalf("draw %d: kept sampler %v, fresh %v", i, got, want)
		}
		trial := fmt.Sprintf("t%d", i)
		for budget := 1; budget <= 9; budget *= 3 { // each trial's results at three budgets
			loss := math.Abs(math.Log10(got["lr"].(float64))+2) * 10 / float64(budget)
			history = append(history, Observation{Params: got, Budget: budget, Loss: loss, Trial: trial})
		}
	}
	if len(kept.encoded) != 119 {
		t.Fatalf("%d configurations cached, want 119: the last trial's results came after the last draw", len(kept.encoded))
	}
}

// The same seed and history give the same draws; another seed other draws.
func TestTPEIsDeterministic(t *testing.T) {
	space := map[string]spec.Param{
		"lr":    {Type: "loguniform", Min: 1e-4, Max: 1},
		"units": {Type: "int", Min: 8, Max: 512},
		"act":   {Type: "choice", Values: []any{"relu", "tanh", "gelu"}},
	}
	draws := func(seed int64) []spec.Config {
		tpe := NewTPE(space, tpeOptions(4))
		var history []Observation
		var out []spec.Config
		for i := range 40 {
			c := tpe.Draw(i, history, TrialRand(seed, i))
			out = append(out, c)
			loss := math.Abs(math.Log10(c["lr"].(float64))+2) + math.Abs(float64(c["units"].(int64))-100)/100
			if c["act"] == "tanh" {
				loss -= 0.5
			}
			history = append(history, Observation{Params: c, Budget: 1, Loss: loss})
		}
		return out
	}
	a, b, other := draws(5), draws(5), draws(6)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same seed drew differently")
	}
	if reflect.DeepEqual(a, other) {
		t.Fatal("seeds 5 and 6 drew the same configurations")
	}
	for _, c := range a {
		u := c["units"].(int64)
		if u < 8 || u > 512 {
			t.Fatalf("units %d outside [8, 512]", u)
		}
		if lr := c["lr"].(float64); lr < 1e-4 || lr > 1 {
			t.Fatalf("lr %v outside [1e-4, 1]", lr)
		}
	}
}

func conditionalSpace() map[string]spec.Param {
	return map[string]spec.Param{
		"optimizer": {Type: "choice", Values: []any{"sgd", "adam"}},
		"momentum":  {Type: "uniform", Min: 0, Max: 0.99, When: map[string]spec.AnyOf{"optimizer": {"sgd"}}},
		"nesterov":  {Type: "choice", Values: []any{true, false}, When: map[string]spec.AnyOf{"optimizer": {"sgd"}}},
		"dampening": {Type: "uniform", Min: 0, Max: 1, When: map[string]spec.AnyOf{"nesterov": {false}}},
		"beta1":     {Type: "uniform", Min: 0.8, Max: 0.999, When: map[string]spec.AnyOf{"optimizer": {"adam"}}},
		"lr":        {Type: "loguniform", Min: 1e-4, Max: 1},
	}
}

// active is the set of parameters a configuration of conditionalSpace must hold.
func wantActive(c spec.Config) []string {
	want := []string{"lr", "optimizer"}
	if c["optimizer"] == "sgd" {
		want = append(want, "momentum", "nesterov")
		if c["nesterov"] == false {
			want = append(want, "dampening")
		}
	} else {
		want = append(want, "beta1")
	}
	slices.Sort(want)
	return want
}

func keys(c spec.Config) []string {
	var out []string
	for k := range c {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Every sampler's configurations under conditions hold exactly their active parameters.
func TestEverySamplerDrawsOnlyActiveParameters(t *testing.T) {
	space := conditionalSpace()
	check := func(who string, c spec.Config) {
		t.Helper()
		if got, want := keys(c), wantActive(c); !slices.Equal(got, want) {
			t.Fatalf("%s drew %v: parameters %v, want %v", who, c, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		check("random", spec.SampleConfig(space, r))
	}
	s := NewSobol(len(space), 3)
	for i := range 200 {
		check("sobol", Decode(space, s.Point(uint32(i))))
	}
	for _, c := range spec.GridConfigs(space, 2, 1000) {
		check("grid", c)
	}
	tpe := NewTPE(space, tpeOptions(3))
	var history []Observation
	for i := range 80 {
		c := tpe.Draw(i, history, TrialRand(1, i))
		check("tpe", c)
		loss := math.Abs(math.Log10(c["lr"].(float64)) + 2)
		if m, ok := c["momentum"].(float64); ok {
			loss += math.Abs(m - 0.9)
		} else {
			loss += 1
		}
		history = append(history, Observation{Params: c, Budget: 1, Loss: loss})
	}
	// TPE learned that sgd with momentum near 0.9 is better: most of its last draws are sgd.
	sgd := 0
	for _, o := range history[60:] {
		if o.Params["optimizer"] == "sgd" {
			sgd++
		}
	}
	if sgd < 14 {
		t.Fatalf("%d of TPE's last 20 draws are sgd, the better optimizer; want most", sgd)
	}
}

// The grid under conditions holds each reachable configuration once: sgd branches on momentum
// (2), nesterov (2) and, when nesterov is false, dampening (2); adam on beta1 (2); lr 2 each.
func TestGridEnumeratesReachableCombinationsOnce(t *testing.T) {
	grid := spec.GridConfigs(conditionalSpace(), 2, 1000)
	// sgd: momentum 2 x (nesterov true: 1 + nesterov false: dampening 2) = 6; adam: beta1 2; x lr 2.
	if want := (2*(1+2) + 2) * 2; len(grid) != want {
		t.Fatalf("%d configurations, want %d", len(grid), want)
	}
	if n, ok := spec.GridSize(conditionalSpace(), 2, 1000); !ok || n != len(grid) {
		t.Fatalf("GridSize %d (ok %v), GridConfigs %d", n, ok, len(grid))
	}
	seen := map[string]bool{}
	for _, c := range grid {
		k := fmtConfig(c)
		if seen[k] {
			t.Fatalf("%s twice", k)
		}
		seen[k] = true
	}
	lr := spec.Param{Type: "loguniform", Min: 1e-4, Max: 1}.GridValues(5)
	for i, want := range []float64{1e-4, 1e-3, 1e-2, 1e-1, 1} {
		if math.Abs(lr[i].(float64)-want)/want > 1e-9 {
			t.Fatalf("log grid %v, want 1e-4 .. 1 by decades", lr)
		}
	}
	if ints := (spec.Param{Type: "int", Min: 1, Max: 3}).GridValues(5); len(ints) != 3 {
		t.Fatalf("int grid over 1..3 with 5 points: %v, want 1, 2, 3 once each", ints)
	}
	if _, ok := spec.GridSize(map[string]spec.Param{"a": {Type: "uniform", Max: 1}, "b": {Type: "uniform", Max: 1}}, 100, 9999); ok {
		t.Fatal("a grid of 10,000 fits under a limit of 9,999")
	}
}

func fmtConfig(c spec.Config) string {
	out := ""
	for _, k := range keys(c) {
		out += k + "=" + fmt.Sprint(c[k]) + " "
	}
	return out
}

// Of the first 2^k points of the scrambled Sobol sequence, each of the 2^k cells of each
// coordinate holds exactly one; and in two dimensions its discrepancy is well below random
// points'.
func TestSobolIsStratifiedAndLowDiscrepancy(t *testing.T) {
	const d, n = 8, 256
	s := NewSobol(d, 42)
	points := make([][]float64, n)
	for i := range points {
		points[i] = s.Point(uint32(i))
	}
	for j := range d {
		cells := make([]int, n)
		for _, p := range points {
			cells[int(p[j]*n)]++
		}
		for c, k := range cells {
			if k != 1 {
				t.Fatalf("coordinate %d: cell %d of %d holds %d points", j, c, n, k)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	random := make([][]float64, n)
	for i := range random {
		random[i] = []float64{r.Float64(), r.Float64()}
	}
	for _, pair := range [][2]int{{0, 1}, {2, 5}, {6, 7}} {
		proj := make([][]float64, n)
		for i, p := range points {
			proj[i] = []float64{p[pair[0]], p[pair[1]]}
		}
		if ds, dr := discrepancy(proj), discrepancy(random); ds > dr/2 {
			t.Errorf("coordinates %v: star discrepancy %.4f, random points' %.4f", pair, ds, dr)
		}
	}
	if reflect.DeepEqual(NewSobol(d, 1).Point(5), NewSobol(d, 2).Point(5)) {
		t.Fatal("seeds 1 and 2 scramble alike")
	}
	if !reflect.DeepEqual(NewSobol(d, 1).Point(5), NewSobol(d, 1).Point(5)) {
		t.Fatal("one seed, two sequences")
	}
}

// discrepancy is the star discrepancy of 2-D points over the boxes anchored at 0 whose corners
// are on the points' coordinates (a lower bound of the true one, close at this size).
func discrepancy(points [][]float64) float64 {
	worst := 0.0
	n := float64(len(points))
	for _, a := range points {
		for _, b := range points {
			x, y := a[0], b[1]
			in, closed := 0, 0
			for _, p := range points {
				if p[0] < x && p[1] < y {
					in++
				}
				if p[0] <= x && p[1] <= y {
					closed++
				}
			}
			worst = max(worst, math.Abs(float64(in)/n-x*y), math.Abs(float64(closed)/n-x*y))
		}
	}
	return worst
}

// The first primitive polynomials are the known ones: x+1, x^2+x+1, x^3+x+1, x^3+x^2+1, then
// degree 4's x^4+x+1 and x^4+x^3+1 (x^4+x^3+x^2+x+1 is irreducible but not primitive).
func TestPrimitivePolynomials(t *testing.T) {
	want := []uint32{0b11, 0b111, 0b1011, 0b1101, 0b10011, 0b11001}
	if got := primitivePolynomials(6); !slices.Equal(got, want) {
		t.Fatalf("%b, want %b", got, want)
	}
	// There are phi(2^s-1)/s primitive polynomials of degree s: 6 of degree 6, 18 of degree 7.
	all := primitivePolynomials(1 + 1 + 2 + 2 + 6 + 6 + 18)
	if got := all[len(all)-1]; got>>7 != 1 {
		t.Fatalf("the 36th primitive polynomial %b is not of degree 7", got)
	}
}

// A draw with 1,000 results of 20 parameters (every draw from the model): under 5 ms.
func BenchmarkTPEDraw(b *testing.B) {
	space := map[string]spec.Param{}
	for i := range 20 {
		name := string(rune('a'+i)) + "p"
		switch i % 4 {
		case 0:
			space[name] = spec.Param{Type: "choice", Values: []any{"x", "y", "z"}}
		case 1:
			space[name] = spec.Param{Type: "loguniform", Min: 1e-5, Max: 1}
		case 2:
			space[name] = spec.Param{Type: "int", Min: 1, Max: 100}
		default:
			space[name] = spec.Param{Type: "uniform", Min: -1, Max: 1}
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	history := make([]Observation, 1000)
	for i := range history {
		history[i] = Observation{Params: spec.SampleConfig(space, r), Budget: 9, Loss: r.Float64()}
	}
	for i := range history {
		history[i].Trial = fmt.Sprint(i)
	}
	for _, multivariate := range []bool{false, true} {
		opt := tpeOptions(21)
		opt.Multivariate = multivariate
		b.Run(fmt.Sprintf("multivariate=%v", multivariate), func(b *testing.B) {
			// As the executor draws: a sampler kept for the run, its history's configurations
			// encoded by earlier draws, fitted on the history.
			kept := NewTPE(space, opt)
			kept.Draw(0, history, r)
			for i := range b.N {
				kept.Draw(i, history, r)
			}
		})
		b.Run(fmt.Sprintf("multivariate=%v/fresh", multivariate), func(b *testing.B) {
			for i := range b.N { // a sampler made afresh, encoding every configuration
				NewTPE(space, opt).Draw(i, history, r)
			}
		})
	}
}

// The parameter the loss depends on is the most important, by far; one it ignores explains
// next to nothing; an inactive parameter's results count in a bin of their own.
func TestImportances(t *testing.T) {
	space := map[string]spec.Param{
		"lr":    {Type: "loguniform", Min: 1e-4, Max: 1},
		"noise": {Type: "uniform", Min: 0, Max: 1},
		"opt":   {Type: "choice", Values: []any{"sgd", "adam"}},
		"mom":   {Type: "uniform", Min: 0, Max: 1, When: map[string]spec.AnyOf{"opt": {"sgd"}}},
	}
	r := rand.New(rand.NewPCG(4, 4))
	var obs []Observation
	for range 400 {
		c := spec.SampleConfig(space, r)
		loss := math.Pow(math.Log10(c["lr"].(float64))+2, 2) + 0.01*r.NormFloat64()
		obs = append(obs, Observation{Params: c, Budget: 1, Loss: loss})
	}
	obs = append(obs, Observation{Params: spec.Config{"lr": 0.01}, Budget: 1, Loss: math.Inf(1)}) // a failure: left out
	imp := Importances(space, obs)
	if imp[0].Param != "lr" || imp[0].Share < 0.6 || imp[0].Results != 400 {
		t.Fatalf("lr should lead with most of the variance over 400 results: %+v", imp)
	}
	for _, i := range imp[1:] {
		if i.Share > 0.05 {
			t.Fatalf("%s explains %.3f of a loss it does not enter: %+v", i.Param, i.Share, imp)
		}
	}
}

// A warm start changes exactly the draws the model makes: given the same seed, a draw the coin
// keeps random is the same with or without it; a draw it gives the model is another, and nearer
// the optimum the earlier run found, while the cold sampler, with no results, draws at random.
func TestWarmStartChangesTheModelsDraws(t *testing.T) {
	space := map[string]spec.Param{"x": {Type: "uniform", Min: -10, Max: 10}}
	opt := tpeOptions(2)
	third := 1.0 / 3
	opt.RandomFraction = &third
	r := rand.New(rand.NewPCG(8, 8))
	var warm []Observation
	for range 60 { // an earlier run's results: the optimum at 3
		x := -10 + 20*r.Float64()
		warm = append(warm, Observation{Params: spec.Config{"x": x}, Budget: 9, Loss: (x - 3) * (x - 3)})
	}
	tpe := NewTPE(space, opt)
	same, changed := 0, 0
	var nearer, farther float64
	for i := range 40 {
		cold := tpe.Draw(i, nil, TrialRand(1, i))
		hot := tpe.Draw(i, warm, TrialRand(1, i))
		if coin := TrialRand(1, i).Float64(); coin < third {
			if !reflect.DeepEqual(cold, hot) {
				t.Fatalf("draw %d: the coin keeps it random, yet the warm start changed it: %v, %v", i, cold, hot)
			}
			same++
			continue
		}
		changed++
		nearer += math.Abs(hot["x"].(float64) - 3)
		farther += math.Abs(cold["x"].(float64) - 3)
	}
	if same == 0 || changed == 0 || nearer > farther/4 {
		t.Fatalf("%d draws kept, %d changed; mean distance to the optimum %.2f warm, %.2f cold", same, changed, nearer/float64(changed), farther/float64(changed))
	}
}

// The model pools the trials at budgets from a third of the fitted one up, each once, at the
// largest budget it reached, ranked by its quantile there: the best at the budget below the
// fitted one is good, a trial promoted from it and worst at the fitted budget is bad, and
// results at smaller budgets are left out.
func TestTPEPoolsTrialsAtTheirLargestBudget(t *testing.T) {
	space := map[string]spec.Param{"x": {Type: "uniform", Min: 0, Max: 1}}
	tpe := NewTPE(space, tpeOptions(2))
	obs := func(x float64, budget int, loss float64) Observation {
		return Observation{Params: spec.Config{"x": x}, Budget: budget, Loss: loss}
	}
	var history []Observation
	for i := range 20 { // budget 1, left out: 1 < 9/3
		history = append(history, obs(0.9+float64(i)/1000, 1, -100))
	}
	for i := range 8 { // budget 3: the trials stopped there, ranked among them
		history = append(history, obs(0.1+float64(i)/100, 3, float64(i)))
	}
	history = append(history, obs(0.5, 3, -1), obs(0.5, 9, 100)) // promoted, then the worst
	for i := range 4 {
		history = append(history, obs(0.3+float64(i)/100, 9, float64(i)))
	}
	if b, n := tpe.Budget(history); b != 9 || n != 5 {
		t.Fatalf("fitted at budget %d (%d results), want 9 (5)", b, n)
	}
	trials := tpe.pool(history, 3)
	if len(trials) != 13 {
		t.Fatalf("%d trials pooled, want 13 (8 at budget 3, 5 at 9)", len(trials))
	}
	m := tpe.fit(history)
	if len(m.good.points)+len(m.bad.points) != 13 {
		t.Fatalf("%d good and %d bad points, want 13 in all", len(m.good.points), len(m.bad.points))
	}
	if x := m.good.points[0][0]; x != 0.1 && x != 0.3 {
		t.Errorf("best point at %v, want the best at budget 3 or at 9 (0.1 or 0.3)", x)
	}
	for _, p := range m.good.points {
		if p[0] >= 0.9 || p[0] == 0.5 {
			t.Errorf("good point at %v: a budget-1 result or the trial worst at budget 9", p[0])
		}
	}
	// Ranked at budget 9 (quantile 0.9), not at 3 (the best there): among the last of the bad.
	if i := slices.IndexFunc(m.bad.points, func(p []float64) bool { return p[0] == 0.5 }); i < len(m.bad.points)-2 {
		t.Errorf("the promoted trial worst at budget 9 is bad point %d of %d, want one of the last two", i, len(m.bad.points))
	}
}
