package pareto

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// Point is a result: one loss per objective, and by how much it misses its constraints in all
// (0: feasible).
type Point struct {
	Losses    []float64
	Violation float64
}

// Dominates reports whether a is no worse than b in every loss and better in one.
func Dominates(a, b []float64) bool {
	better := false
	for i := range a {
		x, y := loss(a[i]), loss(b[i])
		if x > y {
			return false
		}
		if x < y {
			better = true
		}
	}
	return better
}

// loss is v with NaN as +Inf: a metric never reported is the worst.
func loss(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(1)
	}
	return v
}

// Fronts sorts points into non-dominated fronts (Deb et al.'s fast non-dominated sort): the
// first holds those no point dominates, each next those only points of earlier fronts dominate.
// Indices in each front are ascending.
func Fronts(points [][]float64) [][]int {
	if len(points) > 0 && len(points[0]) == 2 {
		return fronts2(points)
	}
	return debFronts(points)
}

// debFronts is Fronts by Deb et al.'s fast non-dominated sort: O(n²) dominance tests.
func debFronts(points [][]float64) [][]int {
	n := len(points)
	dominated := make([][]int, n) // dominated[i]: the points i dominates
	count := make([]int, n)       // how many points dominate i
	for i := range n {
		for j := i + 1; j < n; j++ {
			switch {
			case Dominates(points[i], points[j]):
				dominated[i] = append(dominated[i], j)
				count[j]++
			case Dominates(points[j], points[i]):
				dominated[j] = append(dominated[j], i)
				count[i]++
			}
		}
	}
	var fronts [][]int
	var front []int
	for i := range n {
		if count[i] == 0 {
			front = append(front, i)
		}
	}
	for len(front) > 0 {
		fronts = append(fronts, front)
		var next []int
		for _, i := range front {
			for _, j := range dominated[i] {
				if count[j]--; count[j] == 0 {
					next = append(next, j)
				}
			}
		}
		slices.Sort(next)
		front = next
	}
	return fronts
}

// fronts2 is Fronts of two objectives in O(n log n) (Jensen, 2003): the points by the first loss
// (then the second), each goes to the first front none of whose members dominates it. A
// member dominates it when its second loss is lower, or equal with a lower first loss; the
// front's member of the lowest second loss so far (its last) is the one to ask.
func fronts2(points [][]float64) [][]int {
	at := make([]int, len(points))
	for i := range at {
		at[i] = i
	}
	slices.SortFunc(at, func(a, b int) int {
		return cmp.Or(cmp.Compare(loss(points[a][0]), loss(points[b][0])), cmp.Compare(loss(points[a][1]), loss(points[b][1])), cmp.Compare(a, b))
	})
	var fronts [][]int
	var last []int // each front's member of the lowest second loss
	for _, i := range at {
		x, y := loss(points[i][0]), loss(points[i][1])
		// The fronts' lasts have non-decreasing second losses (each front's members were
		// dominated by the one before's last when they came, and a last only falls): the
		// fronts that dominate the point are a prefix, found by bisection.
		k := sort.Search(len(fronts), func(k int) bool {
			lx, ly := loss(points[last[k]][0]), loss(points[last[k]][1])
			return !(ly < y || ly == y && lx < x)
		})
		if k == len(fronts) {
			fronts, last = append(fronts, nil), append(last, i)
		}
		fronts[k] = append(fronts[k], i)
		if ly := loss(points[last[k]][1]); y < ly || y == ly && x < loss(points[last[k]][0]) {
			last[k] = i
		}
	}
	for _, f := range fronts {
		slices.Sort(f)
	}
	return fronts
}

// Front is the indices of the points no other point dominates, ascending.
func Front(points [][]float64) []int {
	if len(points) == 0 {
		return nil
	}
	return Fronts(points)[0]
}

// Crowding is NSGA-II's crowding distance of each point of front (indices into points): per
// objective, the gap between its neighbours in that objective over the front's range, summed;
// a front's extremes in any objective get +Inf, so that promotion keeps the front's ends (an
// objective the whole front ties in has none).
func Crowding(points [][]float64, front []int) []float64 {
	d := make([]float64, len(front))
	if len(front) == 0 {
		return d
	}
	at := make([]int, len(front)) // positions in front, sorted by one objective
	for m := range points[front[0]] {
		for i := range at {
			at[i] = i
		}
		value := func(i int) float64 { return loss(points[front[at[i]]][m]) }
		slices.SortStableFunc(at, func(a, b int) int { return cmp.Compare(loss(points[front[a]][m]), loss(points[front[b]][m])) })
		span := value(len(at)-1) - value(0)
		if span <= 0 || math.IsNaN(span) { // every point alike in it: no extremes to keep
			continue
		}
		d[at[0]], d[at[len(at)-1]] = math.Inf(1), math.Inf(1)
		if math.IsInf(span, 0) {
			continue
		}
		for k := 1; k < len(at)-1; k++ {
			d[at[k]] += (value(k+1) - value(k-1)) / span
		}
	}
	return d
}

// Order is the order promotion ranks points in, best first: feasible points first, by
// non-dominated front, within a front by crowding distance (larger first), ties by index;
// then the infeasible ones, by violation (smaller first), ties by index. With one objective and
// no constraint it is the points sorted by loss, ties by index.
func Order(points []Point) []int {
	var feasible, infeasible []int
	for i, p := range points {
		if p.Violation > 0 || math.IsNaN(p.Violation) {
			infeasible = append(infeasible, i)
		} else {
			feasible = append(feasible, i)
		}
	}
	losses := make([][]float64, len(feasible))
	for i, j := range feasible {
		losses[i] = points[j].Losses
	}
	out := make([]int, 0, len(points))
	for _, front := range Fronts(losses) {
		crowd := Crowding(losses, front)
		at := make([]int, len(front))
		for i := range at {
			at[i] = i
		}
		slices.SortStableFunc(at, func(a, b int) int { // front is ascending: ties keep the index order
			return cmp.Compare(crowd[b], crowd[a])
		})
		for _, i := range at {
			out = append(out, feasible[front[i]])
		}
	}
	slices.SortStableFunc(infeasible, func(a, b int) int {
		return cmp.Compare(violation(points[a].Violation), violation(points[b].Violation))
	})
	return append(out, infeasible...)
}

func violation(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(1)
	}
	return v
}

// Hypervolume is the volume of the region the points dominate, bounded by the reference point
// ref (a point that does not beat ref in every loss adds nothing): exact, by slicing along the
// last objective (two objectives: one sweep). The benchmarks' measure of a front.
func Hypervolume(points [][]float64, ref []float64) float64 {
	var in [][]float64
	for _, p := range points {
		ok := true
		for m := range ref {
			if !(loss(p[m]) < ref[m]) {
				ok = false
				break
			}
		}
		if ok {
			in = append(in, p)
		}
	}
	return hypervolume(in, ref)
}

func hypervolume(points [][]float64, ref []float64) float64 {
	switch d := len(ref); {
	case len(points) == 0:
		return 0
	case d == 1:
		best := ref[0]
		for _, p := range points {
			best = min(best, p[0])
		}
		return ref[0] - best
	case d == 2:
		return sweep2(points, ref)
	}
	// Slice along the last objective: between consecutive values of it, the points at or below
	// the slice dominate a volume of one dimension less.
	last := len(ref) - 1
	sorted := slices.Clone(points)
	slices.SortFunc(sorted, func(a, b []float64) int { return cmp.Compare(a[last], b[last]) })
	volume := 0.0
	for i := range sorted {
		top := ref[last]
		if i+1 < len(sorted) {
			top = sorted[i+1][last]
		}
		if top <= sorted[i][last] {
			continue
		}
		slice := make([][]float64, 0, i+1)
		for _, p := range sorted[:i+1] {
			slice = append(slice, p[:last])
		}
		volume += (top - sorted[i][last]) * hypervolume(slice, ref[:last])
	}
	return volume
}

// sweep2 is the two-objective hypervolume: the points by their first loss, each adds the strip
// from it to ref in the first loss, between its second loss and the lowest one before it.
func sweep2(points [][]float64, ref []float64) float64 {
	sorted := slices.Clone(points)
	slices.SortFunc(sorted, func(a, b []float64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	volume, lowest := 0.0, ref[1]
	for _, p := range sorted {
		if p[1] < lowest {
			volume += (ref[0] - p[0]) * (lowest - p[1])
			lowest = p[1]
		}
	}
	return volume
}
