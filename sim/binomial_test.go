package sim

import "testing"

// The interval by hand: Binomial(20, 0.8) puts 0.010% at or below 8 and 0.056% at or below 9
// (more than the 0.05% a tail may hold), and 1.2% at 20, so 99.9% of it lies in 9..20. A sure
// outcome is its own interval.
func TestBinomialInterval(t *testing.T) {
	for _, tc := range []struct {
		n      int
		p, c   float64
		lo, hi int
	}{
		{20, 0.8, 0.999, 9, 20},
		{100, 0.5, 0.95, 40, 60},
		{10, 0, 0.999, 0, 0},
		{10, 1, 0.999, 10, 10},
	} {
		if lo, hi := BinomialInterval(tc.n, tc.p, tc.c); lo != tc.lo || hi != tc.hi {
			t.Errorf("Binomial(%d, %v) at %v: %d..%d, want %d..%d", tc.n, tc.p, tc.c, lo, hi, tc.lo, tc.hi)
		}
	}
}
