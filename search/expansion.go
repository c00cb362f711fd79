package search

import "math"

// expansion is one numeric coordinate's sum of Gaussian kernels, Σ exp(-((x-y)/h)²/2) over its
// points y, as a Taylor series about the centres of boxes h wide (the fast Gauss transform of
// Greengard and Strain, 1991, in one dimension). With s = (y-c)/h and t = (x-c)/h for a box's
// centre c:
//
//	exp(-(t-s)²/2) = exp(-t²/2) · Σ_k t^k · s^k exp(-s²/2) / k!
//
// so a box's points fold into expansionTerms moments once, and a candidate costs a few boxes'
// polynomials instead of a kernel per point. Normal-reference bandwidths of many parameters are
// wide (n^(-1/(4+d))), so the window around a candidate holds most points: a draw with 1,000
// results and 20 parameters evaluated a million kernels. The terms dropped are below 1e-6 of
// the sum for every box within the window (|s| ≤ 1/2, |t| ≤ window + 1/2).
type expansion struct {
	inv     float64 // 1/h
	moments [][expansionTerms]float64
}

// expansionTerms is the length of each box's series.
const expansionTerms = 16

// expansion folds vals (in [0, 1]) into the moments of boxes h wide.
func (t *TPE) expansion(vals []float64, h float64) expansion {
	boxes := int(math.Ceil(1/h)) + 1
	e := expansion{inv: 1 / h, moments: make([][expansionTerms]float64, boxes)}
	for _, y := range vals {
		b := e.box(y)
		s := y*e.inv - (float64(b) + 0.5)
		term := t.gauss(s * s) // |s| ≤ 1/2
		m := &e.moments[b]
		for k := range expansionTerms {
			m[k] += term
			term *= s / float64(k+1)
		}
	}
	return e
}

func (e *expansion) box(y float64) int {
	return min(max(int(y*e.inv), 0), len(e.moments)-1)
}

// sum is Σ exp(-((x-y)/h)²/2) over the points y within about window bandwidths of x.
func (e *expansion) sum(x float64) float64 {
	var total float64
	b := e.box(x)
	from, to := max(b-window-1, 0), min(b+window+1, len(e.moments)-1)
	for i := from; i <= to; i++ {
		tt := x*e.inv - (float64(i) + 0.5)
		if tt*tt > (window+0.5)*(window+0.5) {
			continue
		}
		m := &e.moments[i]
		v := m[expansionTerms-1]
		for k := expansionTerms - 2; k >= 0; k-- {
			v = v*tt + m[k]
		}
		total += math.Exp(-0.5*tt*tt) * v
	}
	return total
}

// expansionPays says whether an expansion is cheaper than summing kernels directly, for n
// points with bandwidth h and the given number of candidates: a direct sum costs a kernel per
// point in the window, an expansion a series per point and a few series per candidate.
func expansionPays(n int, h float64, candidates int) bool {
	inWindow := float64(n) * min(1, 2*window*h)
	boxes := min(2*window+3, math.Ceil(1/h)+1)
	direct := float64(candidates) * inWindow * 2 // a kernel: about two terms' work
	series := float64(n)*expansionTerms + float64(candidates)*boxes*(expansionTerms+10) + (math.Ceil(1/h)+1)*expansionTerms
	return series < direct
}
