package search

import (
	"math"
	"slices"
	"sort"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Importance is how much of the loss's variance one parameter explains alone.
type Importance struct {
	Param string `json:"param"`
	// Share is the correlation ratio eta²: the variance of the loss's means within the
	// parameter's bins (a choice's values; a numeric parameter's quartiles, in log space for
	// loguniform; one bin where it is inactive) over the loss's variance, in [0, 1]. Shares of
	// interacting parameters do not add up to 1: each is measured alone.
	Share float64 `json:"share"`
	// Results is how many results it was measured on (finite losses).
	Results int `json:"results"`
}

// Importances measures every parameter of space on results of one budget (finite losses only),
// most important first. It is the simple, documented measure of docs/search.md, not fANOVA:
// it sees main effects, not interactions.
func Importances(space map[string]spec.Param, obs []Observation) []Importance {
	var rows []Observation
	for _, o := range obs {
		if !math.IsInf(o.Loss, 0) && !math.IsNaN(o.Loss) {
			rows = append(rows, o)
		}
	}
	var mean, total float64
	for _, o := range rows {
		mean += o.Loss / float64(len(rows))
	}
	for _, o := range rows {
		total += (o.Loss - mean) * (o.Loss - mean)
	}
	ds := dims(space)
	out := make([]Importance, 0, len(ds))
	for j, d := range ds {
		imp := Importance{Param: d.name, Results: len(rows)}
		if total > 0 && len(rows) > 1 {
			bins := binOf(ds, j, rows)
			sums, counts := map[int]float64{}, map[int]int{}
			for i, o := range rows {
				sums[bins[i]] += o.Loss
				counts[bins[i]]++
			}
			var between float64
			for b, n := range counts {
				m := sums[b] / float64(n)
				between += float64(n) * (m - mean) * (m - mean)
			}
			imp.Share = between / total
		}
		out = append(out, imp)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Share > out[b].Share })
	return out
}

// binOf puts each row in a bin of dimension j: a choice's value index, a numeric value's
// quartile of the rows where it is active, -1 where it is inactive.
func binOf(ds []dim, j int, rows []Observation) []int {
	enc := make([]float64, len(rows))
	var active []float64
	for i, o := range rows {
		enc[i] = encode(ds[j:j+1], spec.Config{ds[j].name: o.Params[ds[j].name]})[0]
		if !math.IsNaN(enc[i]) {
			active = append(active, enc[i])
		}
	}
	slices.Sort(active)
	cuts := make([]float64, 0, 3)
	for _, q := range []float64{0.25, 0.5, 0.75} {
		if len(active) > 0 {
			cuts = append(cuts, active[int(q*float64(len(active)-1))])
		}
	}
	bins := make([]int, len(rows))
	for i, x := range enc {
		switch {
		case math.IsNaN(x):
			bins[i] = -1
		case ds[j].levels > 0:
			bins[i] = int(x)
		default:
			b := 0
			for _, c := range cuts {
				if x > c {
					b++
				}
			}
			bins[i] = b
		}
	}
	return bins
}
