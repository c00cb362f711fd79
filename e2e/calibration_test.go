package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Calibration: a noisy job (e2e/testdata/calibration.yaml) whose launches are profiled by
// `rubberband profile` (every launch's start-up kept, the launch overhead, the first-stage lag
// and the contention, measured on a quiet twin of its trainer) and whose iterations are given
// as the truth's (measuring a mean with a spread of half of it within a point would take
// thousands),
// planned at deadline_quantile 0.8 under each of 100
// seeds and run for real on local processes (other trials, other noise), the plan kept: the
// share of runs that meet the deadline against the share the plans predicted (issue 42's goal:
// within 5 points), and the realized mean JCT against the predicted mean (goal: within 1%). It
// fails when the share met falls outside the binomial 99.9% interval of the predicted share: a
// model whose spread was too narrow (one start-up a GPU count, as profiles were) falls below it.
// RB_CALIBRATION_RUNS runs another number of seeds.
//
// A benchmark of `make fidelity`, not a test: it times real runs, which a loaded machine skews
// (TestCalibrationInVirtualTime in executor/virtual holds the same claim over 1,000 virtual runs).
func BenchmarkFidelityCalibration(b *testing.B) { fidelityCalibration(b) }

func fidelityCalibration(t testing.TB) {
	const scale, deadline = 0.2, 70.0
	runs := 100
	if n, err := strconv.Atoi(os.Getenv("RB_CALIBRATION_RUNS")); err == nil && n > 0 {
		runs = n
	}
	dir := t.TempDir()
	spec, profile := measuredSpec(t, dir, "calibration.yaml", scale, "1,2", 5, 3, true)
	prof, _ := os.ReadFile(profile)
	fmt.Printf("\nthe profile measured:\n%s", prof)
	tab := fidelityTable(fmt.Sprintf("calibration: e2e/testdata/calibration.yaml profiled, %d seeds at time scale %v, the plan kept", runs, scale),
		"SEED", "JCT", "PRED MEAN JCT", "PRED P(MISS)", "MET")
	defer tab.Flush() // what was measured, should a run fail
	met, predicted, realizedJCT, predictedJCT := 0, 0.0, 0.0, 0.0
	for seed := 1; seed <= runs; seed++ {
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
		state := filepath.Join(dir, fmt.Sprint("state-", seed))
		if _, errOut, code := rbTimed(t, "run", spec, "--seed", fmt.Sprint(seed), "--state", state, "--time-scale", fmt.Sprint(scale), "--no-replan"); !finishedCode(code) {
			t.Fatalf("seed %d: run: %s", seed, errOut)
		}
		r := readRunReport(t, state)
		if r.Realized.JCT <= deadline {
			met++
		}
		realizedJCT += r.Realized.JCT
		predictedJCT += r.Predicted.JCT
		tab.Row(seed, format.Clock(r.Realized.JCT), format.Clock(r.Predicted.JCT), fmt.Sprintf("%.0f%%", 100*plan.Predicted.Miss), r.Realized.JCT <= deadline)
		os.RemoveAll(state) // 100 runs' state and logs would fill a small disk
	}
	tab.Flush()
	share := predicted / float64(runs)
	lo, hi := sim.BinomialInterval(runs, share, 0.999)
	fmt.Printf("%d of %d runs met the %v s deadline (%.1f%%); the plans predicted %.1f%% (%+.1f points; goal within 5); the 99.9%% interval is %d to %d; mean JCT %.2f s realized, %.2f s predicted (%+.1f%%)\n",
		met, runs, deadline, 100*float64(met)/float64(runs), 100*share, 100*(float64(met)/float64(runs)-share), lo, hi,
		realizedJCT/float64(runs), predictedJCT/float64(runs), 100*(realizedJCT/predictedJCT-1))
	if met < lo || met > hi {
		t.Fatalf("%d of %d met the deadline: outside %d..%d", met, runs, lo, hi)
	}
}
