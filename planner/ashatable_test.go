package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
)

// An ASHA plan prints in the house style of every plan table (package format's money and
// times, P(miss) in percent; before: "cost $    0.21", "P(miss) 0.100"), and says when
// synchronous SHA of the same trials is cheaper or safer than the elastic schedule: plan
// recommended elastic ASHA at $0.21 and P(miss) 10% without a word of SHA's $0.16 and 0%.
func TestASHAPlanTable(t *testing.T) {
	cand := func(gpus []int, cost, jct, pmiss float64) ASHACandidate {
		return ASHACandidate{Plan: sim.ASHAPlan{GPUs: gpus}, JCT: sim.Summary{Mean: jct, P5: jct - 3, P95: jct + 6}, Cost: sim.Summary{Mean: cost, P5: cost * 0.8, P95: cost * 1.2}, PMiss: pmiss}
	}
	sha := func(cost, pmiss float64) *Report {
		return &Report{Predicted: Prediction{JCT: sim.Summary{Mean: 26.5, P5: 25.5, P95: 27.3}, Cost: sim.Summary{Mean: cost, P5: cost, P95: cost}, DeadlineMissProb: pmiss}}
	}
	for _, tc := range []struct {
		name   string
		sha    *Report
		advice string
	}{
		{"sha cheaper and safer", sha(0.1564, 0), "synchronous SHA of these trials is cheaper and safer: $0.1564 and P(miss) 0% against ASHA's $0.2060 and 10%"},
		{"sha cheaper, riskier", sha(0.1564, 0.3), "cheaper, though it misses the deadline more often (30% against 10%)"},
		{"sha safer at the cost", sha(0.21, 0), "safer, at about the cost"},
		{"asha better", sha(0.40, 0.2), ""},
		{"no sha", nil, ""},
	} {
		r := &ASHAResult{Experiment: "x", Trials: 48, Rungs: []int{1, 4, 16}, Deadline: 30, Quantile: 0.9, Evaluated: 40,
			Elastic: cand([]int{14, 10, 4}, 0.206, 28.1, 0.1), Fixed: cand([]int{14}, 0.2983, 27.5, 0.02), SHA: tc.sha}
		var b bytes.Buffer
		r.WriteTable(&b)
		out := b.String()
		for _, want := range []string{"x · asha, 48 trials, rungs at 1, 4, 16 iterations · deadline 30.0s at p90", "PLAN", "P(MISS)", "14>10>4", "$0.2060", "28.1s", "10%", "elastic against fixed slots: 69% of the cost"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in\n%s", tc.name, want, out)
			}
		}
		for _, not := range []string{"$    ", "0.100", "SPOT"} {
			if strings.Contains(out, not) {
				t.Errorf("%s: %q in\n%s", tc.name, not, out)
			}
		}
		if got := strings.Contains(out, "synchronous SHA of these trials"); got != (tc.advice != "") || tc.advice != "" && !strings.Contains(out, tc.advice) {
			t.Errorf("%s: advice %q wanted, got\n%s", tc.name, tc.advice, out)
		}
	}
}
