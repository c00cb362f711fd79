package bench

import (
	"math"
	"slices"
)

// Summary is a sampler's regret over its seeds at each budget: the quartiles and the median.
type Summary struct {
	Sampler       string    `json:"sampler"`
	Iters         []float64 `json:"iters"`
	P25, P50, P75 []float64 `json:"-"`
	// Median is P50 again, for JSON readers.
	Median []float64 `json:"median"`
	Q1     []float64 `json:"q1"`
	Q3     []float64 `json:"q3"`
	Runs   int       `json:"runs"`
}

// Summarize gives each sampler's quartiles at the budgets (iterations), samplers in order of
// first appearance.
func Summarize(trajs []Trajectory, budgets []float64) []Summary {
	var order []string
	by := map[string][]Trajectory{}
	for _, t := range trajs {
		if _, ok := by[t.Sampler]; !ok {
			order = append(order, t.Sampler)
		}
		by[t.Sampler] = append(by[t.Sampler], t)
	}
	out := make([]Summary, 0, len(order))
	for _, s := range order {
		sum := Summary{Sampler: s, Iters: budgets, Runs: len(by[s])}
		for _, b := range budgets {
			vals := make([]float64, 0, len(by[s]))
			for _, t := range by[s] {
				vals = append(vals, t.At(b))
			}
			q := quartiles(vals)
			sum.P25, sum.P50, sum.P75 = append(sum.P25, q[0]), append(sum.P50, q[1]), append(sum.P75, q[2])
		}
		sum.Median, sum.Q1, sum.Q3 = sum.P50, sum.P25, sum.P75
		out = append(out, sum)
	}
	return out
}

// quartiles of values (+Inf counts as the largest), by linear interpolation.
func quartiles(values []float64) [3]float64 {
	v := slices.Clone(values)
	slices.Sort(v)
	var q [3]float64
	for i, p := range []float64{0.25, 0.5, 0.75} {
		if len(v) == 0 {
			q[i] = math.NaN()
			continue
		}
		x := p * float64(len(v)-1)
		lo := int(math.Floor(x))
		hi := min(lo+1, len(v)-1)
		if math.IsInf(v[hi], 1) || math.IsInf(v[lo], 1) {
			q[i] = v[hi]
			continue
		}
		q[i] = v[lo] + (x-float64(lo))*(v[hi]-v[lo])
	}
	return q
}

// Budgets are n budgets evenly spaced up to total iterations.
func Budgets(total float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = total * float64(i+1) / float64(n)
	}
	return out
}

// ToReach is the smallest budget at which s's median regret is at most target (+Inf: never).
func (s Summary) ToReach(target float64) float64 {
	for i, m := range s.P50 {
		if m <= target {
			return s.Iters[i]
		}
	}
	return math.Inf(1)
}

// FinalMedian is the median regret at the last budget.
func (s Summary) FinalMedian() float64 { return s.P50[len(s.P50)-1] }
