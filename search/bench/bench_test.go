package bench

import (
	"context"
	"math"
	"reflect"
	"testing"
)

// A seed's run is the same run every time; its regret is never below 0 and it spends what the
// job trains; the samplers search differently.
func TestTrajectories(t *testing.T) {
	c := Case{Objective: "branin", Algorithm: "hyperband", Rounds: 2}
	p, err := Prepare(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	run := func(sampler string, seed int) Trajectory {
		tr, err := p.Run(context.Background(), sampler, seed, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := run("tpe", 3), run("tpe", 3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one seed, two trajectories")
	}
	if last := a.Points[len(a.Points)-1]; last.Iters != float64(p.Iters) || !(last.Dollars > 0) {
		t.Fatalf("the run spent %v iterations ($%v); the job trains %d", last.Iters, last.Dollars, p.Iters)
	}
	for _, pt := range a.Points {
		if pt.Regret < -1e-9 || math.IsNaN(pt.Regret) {
			t.Fatalf("regret %v", pt.Regret)
		}
	}
	if r := run("random", 3); reflect.DeepEqual(r.Points, a.Points) {
		t.Fatal("random and tpe searched alike")
	}
	sums := Summarize([]Trajectory{a, run("tpe", 4)}, Budgets(float64(p.Iters), 4))
	if len(sums) != 1 || sums[0].Runs != 2 || len(sums[0].P50) != 4 || sums[0].P25[3] > sums[0].P75[3] {
		t.Fatalf("summary %+v", sums)
	}
}

// Quartiles interpolate, and a run with no result yet counts as the worst.
func TestQuartiles(t *testing.T) {
	if q := quartiles([]float64{4, 1, 3, 2, 5}); q != [3]float64{2, 3, 4} {
		t.Fatalf("%v", q)
	}
	if q := quartiles([]float64{3, 1, math.Inf(1), 2}); q[0] != 1.75 || q[1] != 2.5 || !math.IsInf(q[2], 1) {
		t.Fatalf("%v", q)
	}
}
