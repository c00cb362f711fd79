package sim

import "math"

// BinomialInterval is the central interval [lo, hi] of Binomial(n, p) holding at least conf of
// its mass: each tail outside it holds at most (1 - conf) / 2. Calibration checks hold an
// observed count of deadline misses (or hits) to it.
func BinomialInterval(n int, p, conf float64) (lo, hi int) {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	pmf := func(k int) float64 {
		switch {
		case p <= 0:
			return map[bool]float64{true: 1}[k == 0]
		case p >= 1:
			return map[bool]float64{true: 1}[k == n]
		}
		return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log(1-p))
	}
	tail := (1 - conf) / 2
	for below := 0.0; lo <= n && below+pmf(lo) <= tail; lo++ {
		below += pmf(lo)
	}
	hi = n
	for above := 0.0; hi >= 0 && above+pmf(hi) <= tail; hi-- {
		above += pmf(hi)
	}
	return lo, hi
}
