package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/format"
)

// Calibration: a noisy job (cmd/rubberband/testdata/calibration.yaml) planned at
// deadline_quantile 0.8 and run for real under 20 fixed seeds (other trials, other noise), the
// plan kept: the share of runs that meet the deadline is within the binomial 99.9% interval of
// 0.8 — a model whose quantiles were off (its spread too narrow, its means too low) would fall
// below it.
//
// A benchmark of `make fidelity`, not a test: it times real runs, which a loaded machine skews
// (TestCalibrationInVirtualTime in executor/virtual holds the same claim over 1,000 virtual runs).
func BenchmarkFidelityCalibration(b *testing.B) { fidelityCalibration(b) }

func fidelityCalibration(t testing.TB) {
	tab := fidelityTable("calibration: cmd/rubberband/testdata/calibration.yaml, 20 seeds at time scale 0.2, the plan kept",
		"SEED", "JCT", "PRED MEAN JCT", "PRED P(MISS)", "MET")
	const runs, quantile, deadline = 20, 0.8, 70.0
	spec := "cmd/rubberband/testdata/calibration.yaml"
	met, predicted := 0, 0.0
	for seed := 1; seed <= runs; seed++ {
		dir := t.TempDir()
		out, errOut, code := rb(t, "plan", spec, "--seed", fmt.Sprint(seed), "-o", "json")
		if code != 0 {
			t.Fatalf("seed %d: plan: %s", seed, errOut)
		}
		var plan struct {
			Predicted struct {
				Miss float64 `json:"deadline_miss_prob"`
			} `json:"predicted"`
		}
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		predicted += 1 - plan.Predicted.Miss
		state := filepath.Join(dir, "state")
		if _, errOut, code := rbTimed(t, "run", spec, "--seed", fmt.Sprint(seed), "--state", state, "--time-scale", "0.2", "--no-replan"); code != 0 {
			t.Fatalf("seed %d: run: %s", seed, errOut)
		}
		r := readRunReport(t, state)
		if r.Realized.JCT <= deadline {
			met++
		}
		tab.Row(seed, format.Clock(r.Realized.JCT), format.Clock(r.Predicted.JCT), fmt.Sprintf("%.0f%%", 100*plan.Predicted.Miss), r.Realized.JCT <= deadline)
	}
	tab.Flush()
	lo, hi := binomialInterval(runs, quantile, 0.999)
	fmt.Printf("%d of %d runs met the %v s deadline; the plans predicted %.0f%%; the 99.9%% interval is %d to %d\n", met, runs, deadline, 100*predicted/runs, lo, hi)
	t.Logf("%d of %d runs met the %v s deadline (%.0f%%); the plans predicted %.0f%%; the 99.9%% interval of %v is %d to %d",
		met, runs, deadline, 100*float64(met)/runs, 100*predicted/runs, quantile, lo, hi)
	if met < lo || met > hi {
		t.Fatalf("%d of %d met the deadline: outside %d..%d", met, runs, lo, hi)
	}
}

// binomialInterval is the central interval [lo, hi] of Binomial(n, p) holding at least conf of
// its mass: each tail outside it holds at most (1 - conf) / 2.
func binomialInterval(n int, p, conf float64) (lo, hi int) {
	pmf := func(k int) float64 {
		lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
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

// The interval by hand: Binomial(20, 0.8) puts 0.010% at or below 8 and 0.056% at or below 9
// (more than the 0.05% a tail may hold), and 1.2% at 20, so 99.9% of it lies in 9..20.
func TestBinomialInterval(t *testing.T) {
	if lo, hi := binomialInterval(20, 0.8, 0.999); lo != 9 || hi != 20 {
		t.Fatalf("%d..%d", lo, hi)
	}
	if lo, hi := binomialInterval(100, 0.5, 0.95); lo != 40 || hi != 60 {
		t.Fatalf("%d..%d", lo, hi)
	}
}
