package pareto

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func randomPoints(r *rand.Rand, n, d, levels int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, d)
		for m := range out[i] {
			out[i][m] = float64(r.IntN(levels)) // few levels: ties and equal points happen
		}
	}
	return out
}

// Fronts partition the points: no point of a front is dominated by a point of it or a later
// one, and each point past the first front is dominated by one of the front before it.
func TestFrontsAgainstTheDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		points := randomPoints(r, r.IntN(40), 1+r.IntN(4), 2+r.IntN(8))
		fronts := Fronts(points)
		rank := make([]int, len(points))
		seen := 0
		for f, front := range fronts {
			if !slices.IsSorted(front) || len(front) == 0 {
				t.Fatalf("round %d: front %d %v: empty or not ascending", round, f, front)
			}
			for _, i := range front {
				rank[i] = f
				seen++
			}
		}
		if seen != len(points) {
			t.Fatalf("round %d: %d of %d points in the fronts", round, seen, len(points))
		}
		for i := range points {
			dominatedBefore := false
			for j := range points {
				if Dominates(points[j], points[i]) {
					if rank[j] >= rank[i] {
						t.Fatalf("round %d: %v (front %d) dominates %v (front %d)", round, points[j], rank[j], points[i], rank[i])
					}
					dominatedBefore = dominatedBefore || rank[j] == rank[i]-1
				}
			}
			if rank[i] > 0 && !dominatedBefore {
				t.Fatalf("round %d: %v in front %d, dominated by none of front %d", round, points[i], rank[i], rank[i]-1)
			}
		}
	}
}

// Order puts every feasible point before every infeasible one (those by violation), keeps the
// fronts in order, puts a front's extremes first, and with one objective is the sort by loss,
// ties by index.
func TestOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 300 {
		d := 1 + r.IntN(3)
		losses := randomPoints(r, r.IntN(30), d, 2+r.IntN(6))
		points := make([]Point, len(losses))
		for i := range points {
			points[i] = Point{Losses: losses[i]}
			if r.IntN(4) == 0 {
				points[i].Violation = float64(1 + r.IntN(3))
			}
		}
		order := Order(points)
		if len(order) != len(points) {
			t.Fatalf("round %d: order %v of %d points", round, order, len(points))
		}
		var feasible [][]float64
		var index []int
		for i, p := range points {
			if p.Violation == 0 {
				feasible, index = append(feasible, p.Losses), append(index, i)
			}
		}
		rank := map[int]int{}
		for f, front := range Fronts(feasible) {
			for _, i := range front {
				rank[index[i]] = f
			}
		}
		for k := 1; k < len(order); k++ {
			a, b := points[order[k-1]], points[order[k]]
			switch {
			case a.Violation > 0 && b.Violation == 0:
				t.Fatalf("round %d: infeasible %d before feasible %d", round, order[k-1], order[k])
			case a.Violation > 0 && a.Violation > b.Violation:
				t.Fatalf("round %d: violation %v before %v", round, a.Violation, b.Violation)
			case a.Violation > 0 && a.Violation == b.Violation && order[k-1] > order[k]:
				t.Fatalf("round %d: equal violations out of index order", round)
			case a.Violation == 0 && b.Violation == 0 && rank[order[k-1]] > rank[order[k]]:
				t.Fatalf("round %d: front %d before front %d", round, rank[order[k-1]], rank[order[k]])
			}
		}
		if d == 1 && !slices.ContainsFunc(points, func(p Point) bool { return p.Violation > 0 }) {
			want := make([]int, len(points))
			for i := range want {
				want[i] = i
			}
			slices.SortStableFunc(want, func(a, b int) int {
				return int(math.Copysign(1, points[a].Losses[0]-points[b].Losses[0])) * b2i(points[a].Losses[0] != points[b].Losses[0])
			})
			if !slices.Equal(order, want) {
				t.Fatalf("round %d: one objective: %v, sorted by loss %v", round, order, want)
			}
		}
	}
	// A front's extremes first: of (0,4) (1,3) (2,2) (4,0), the ends, then the middle ones.
	front := []Point{{Losses: []float64{1, 3}}, {Losses: []float64{0, 4}}, {Losses: []float64{2, 2}}, {Losses: []float64{4, 0}}}
	if got := Order(front); !slices.Equal(got[:2], []int{1, 3}) {
		t.Errorf("order %v: the extremes 1 and 3 first", got)
	}
	// NaN is the worst loss.
	if !Dominates([]float64{1, 5}, []float64{1, math.NaN()}) || Dominates([]float64{math.NaN(), 0}, []float64{1, 1}) {
		t.Error("NaN is not the worst loss")
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Hypervolume against counting the unit cells the points dominate, on a small integer grid, in
// two, three and four objectives.
func TestHypervolumeAgainstCounting(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		d := 2 + r.IntN(3)
		points := randomPoints(r, r.IntN(12), d, 6)
		ref := make([]float64, d)
		for m := range ref {
			ref[m] = 6
		}
		cells := 0
		cell := make([]int, d)
		var walk func(m int)
		walk = func(m int) {
			if m == d {
				for _, p := range points {
					in := true
					for k := range d {
						if p[k] > float64(cell[k]) {
							in = false
							break
						}
					}
					if in {
						cells++
						return
					}
				}
				return
			}
			for v := range 6 {
				cell[m] = v
				walk(m + 1)
			}
		}
		walk(0)
		if got := Hypervolume(points, ref); got != float64(cells) {
			t.Fatalf("round %d: %d objectives, %v: hypervolume %v, %d cells", round, d, points, got, cells)
		}
	}
	if got := Hypervolume([][]float64{{7, 1}, {1, 1}}, []float64{5, 5}); got != 16 {
		t.Errorf("a point beyond the reference counted: %v", got)
	}
}

func BenchmarkOrder1000(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	points := make([]Point, 1000)
	for i := range points {
		x := r.Float64()
		points[i] = Point{Losses: []float64{x + 0.1*r.Float64(), 1 - x + 0.1*r.Float64()}}
	}
	for b.Loop() {
		Order(points)
	}
}

func BenchmarkHypervolume(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	points := randomPoints(r, 200, 3, 1000)
	for b.Loop() {
		Hypervolume(points, []float64{1000, 1000, 1000})
	}
}

// The two-objective sort (by bisection over the fronts) gives Deb's fronts exactly, ties and
// equal points included.
func TestFronts2IsDebs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for round := range 2000 {
		points := randomPoints(r, r.IntN(60), 2, 2+r.IntN(10))
		a, b := fronts2(points), debFronts(points)
		if len(a) != len(b) {
			t.Fatalf("round %d: %d fronts, Deb's %d", round, len(a), len(b))
		}
		for k := range a {
			if !slices.Equal(a[k], b[k]) {
				t.Fatalf("round %d, front %d: %v, Deb's %v", round, k, a[k], b[k])
			}
		}
	}
}
