package search

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The expansion's sum is the kernel sum over the points within the window, to 1e-6 of it, for
// bandwidths from a hundredth to beyond the range and points spread or bunched.
func TestExpansionSumsTheKernels(t *testing.T) {
	tpe := NewTPE(nil, tpeOptions(1))
	r := rand.New(rand.NewPCG(5, 5))
	for trial := range 200 {
		h := math.Exp(r.Float64()*math.Log(200)) / 100 // 0.01 to 2
		n := 1 + r.IntN(2000)
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = r.Float64()
			if trial%2 == 1 { // bunched near one place
				vals[i] = min(max(0.3+0.05*r.NormFloat64(), 0), 1)
			}
		}
		e := tpe.expansion(vals, h)
		for range 50 {
			x := r.Float64()
			var direct, far float64
			for _, y := range vals {
				z := (x - y) / h
				if math.Abs(z) <= window {
					direct += math.Exp(-0.5 * z * z)
				} else if math.Abs(z) <= window+1.5 {
					far += math.Exp(-0.5 * z * z) // boxes at the window's edge may count these
				}
			}
			got := e.sum(x)
			if got < direct-1e-6*direct-1e-12 || got > direct+far+1e-6*direct+1e-12 {
				t.Fatalf("h=%.4f n=%d x=%.4f: expansion %.12g, direct %.12g (+%.3g beyond the window)", h, n, x, got, direct, far)
			}
		}
	}
}

// The kernel table is exp(-z²/2) to 1e-6 of it over the window (it once scaled z² by the
// integer quotient of its steps and the window, 327 for 327.68: 0.2% off at the edge).
func TestGaussTableIsTheKernel(t *testing.T) {
	tpe := NewTPE(nil, tpeOptions(1))
	for i := range 100_001 {
		z2 := float64(i) / 100_000 * window * window
		want := math.Exp(-z2 / 2)
		if got := tpe.gauss(z2); math.Abs(got-want) > 1e-6*want {
			t.Fatalf("gauss(%g) = %.9g, exp(-z²/2) = %.9g", z2, got, want)
		}
	}
}
