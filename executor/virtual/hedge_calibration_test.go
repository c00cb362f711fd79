package virtual_test

import (
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/internal/testkit/paperspec"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Spot calibration in virtual time: the Table 2 plan at p90 (spot at 5 interruptions a
// node-hour, both markets offered, hedges allowed) runs through the unchanged executor, each
// run's interruptions drawn afresh, the plan kept: its mean JCT and cost land within 5% of the
// prediction and the share of runs that miss the deadline within the 99.9% binomial interval of
// the predicted P(miss). Under two notices, both trained through: 15 s, shorter than a
// replacement's 30 s (the gangs train until their node goes; the plan hedges stages), and EC2's
// 2 minutes (the gangs train until the replacement is up; the plan is all on spot). 200 runs
// each; RB_CALIBRATION_RUNS runs another number (at 1,000: 32 missed against 6.1% predicted and
// 40 against 5.0%).
func TestHedgedCalibrationInVirtualTime(t *testing.T) {
	runs := 200
	if n, err := strconv.Atoi(os.Getenv("RB_CALIBRATION_RUNS")); err == nil && n > 0 {
		runs = n
	}
	for _, tc := range []struct {
		notice string
		hedged bool
	}{{"15s", true}, {"2m", false}} {
		t.Run("notice "+tc.notice, func(t *testing.T) {
			spec, err := paperspec.HedgedTable2("../..", t.TempDir(), 0.9, tc.notice)
			if err != nil {
				t.Fatal(err)
			}
			exp, alloc, _ := plan(t, spec)
			hedged := false
			for _, st := range alloc[0] {
				hedged = hedged || st.OnDemand > 0 && st.OnDemand < st.Nodes
			}
			if hedged != tc.hedged {
				t.Fatalf("the plan %v hedges a stage: %v, want %v", alloc, hedged, tc.hedged)
			}
			pred := predict(t, exp, alloc)
			deadline := exp.Deadline.Seconds()
			missed, jct, cost, lost := realize(t, runs, deadline, func(i int) virtual.Config {
				return virtual.Config{Experiment: exp, Alloc: alloc, Seed: int64(1000 + i), RunID: "hedged-calibration"}
			})
			p := sim.MissProb(pred.Outcome.JCT, deadline)
			lo, hi := sim.BinomialInterval(runs, p, 0.999)
			t.Logf("plan %v: %d of %d runs missed the %.0f s deadline (%.1f%%); predicted P(miss) %.1f%%, 99.9%% interval %d..%d; mean JCT %.1f s (predicted %.1f), cost $%.3f (predicted $%.3f); %.2f nodes lost a run",
				alloc, missed, runs, deadline, 100*float64(missed)/float64(runs), 100*p, lo, hi, jct, pred.JCT.Mean, cost, pred.Cost.Mean, lost)
			if math.Abs(jct/pred.JCT.Mean-1) > 0.05 || math.Abs(cost/pred.Cost.Mean-1) > 0.05 {
				t.Errorf("realized JCT %.1f s and cost $%.3f; predicted %.1f s and $%.3f: more than 5%% apart", jct, cost, pred.JCT.Mean, pred.Cost.Mean)
			}
			if missed < lo || missed > hi {
				t.Errorf("%d of %d runs missed the deadline: outside %d..%d", missed, runs, lo, hi)
			}
		})
	}
}
