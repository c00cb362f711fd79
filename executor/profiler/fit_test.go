package profiler

import (
	"math"
	"strings"
	"testing"
	"time"
)

// fit on hand-made report times: the intervals of every run pooled for the mean and the sample
// standard deviation, the start-up from the head (less one iteration) and the tail of each run,
// averaged, never below zero; everything divided by the time scale.
func TestFit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s ...float64) []time.Time {
		out := make([]time.Time, len(s))
		for i, x := range s {
			out[i] = t0.Add(time.Duration(x * float64(time.Second)))
		}
		return out
	}
	run := func(exited float64, reports ...float64) gangRun {
		return gangRun{at: at(reports...), exited: at(exited)[0]}
	}
	for _, tc := range []struct {
		name               string
		runs               []gangRun
		scale              float64
		mean, std, startup float64
	}{
		{"one steady run", []gangRun{run(2.7, 1, 1.5, 2, 2.5)}, 1, 0.5, 0, 0.7},
		// intervals 0.4, 0.6 and 0.5, 0.5: mean 0.5, sample std sqrt(0.02/3); start-ups
		// (1-0.5)+0.1 and (1.2-0.5)+0.3
		{"two runs pooled", []gangRun{run(2.1, 1, 1.4, 2), run(2.5, 1.2, 1.7, 2.2)}, 1, 0.5, math.Sqrt(0.02 / 3), 0.8},
		{"time scale", []gangRun{run(2.7, 1, 1.5, 2, 2.5)}, 0.5, 1, 0, 1.4},
		// the first report came before one iteration could have passed: no negative start-up
		{"clamped", []gangRun{run(0.2, 0.1, 1.1)}, 1, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := fit(t0, tc.runs, tc.scale)
			if err != nil {
				t.Fatal(err)
			}
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
			if !near(pt.Mean, tc.mean) || !near(pt.Std, tc.std) || !near(pt.Startup, tc.startup) {
				t.Fatalf("got mean %v std %v start-up %v, want %v %v %v", pt.Mean, pt.Std, pt.Startup, tc.mean, tc.std, tc.startup)
			}
		})
	}
	if _, err := fit(t0, []gangRun{run(2, 1, 1.5), run(2, 1)}, 1); err == nil || !strings.Contains(err.Error(), "reported 1 time(s)") {
		t.Fatalf("a run with one report: %v", err)
	}
}
