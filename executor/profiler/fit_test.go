package profiler

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
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

// summarize on hand-made rounds, one gang each, an iteration every 0.5 s: the measured rounds'
// start-ups (head less one iteration, plus tail) are 0.3, 0.5 and 0.4 s, their overheads (exit to
// checkpoint saved) 0.01, 0.03 and 0.02 s: medians 0.4 and 0.02 s. The cold round's gang first
// reported 1.7 s after its launch and exited 0.1 s after its last report: a start-up of 1.3 s,
// 0.9 s beyond the measured one: the lag. A cold round no slower than the rest has no lag.
func TestSummarizeOverheadAndLag(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	run := func(start, first, tail, overhead float64) gangRun {
		at := []time.Time{sec(start + first), sec(start + first + 0.5), sec(start + first + 1)}
		exited := sec(start + first + 1 + tail)
		return gangRun{start: sec(start), at: at, exited: exited, saved: exited.Add(time.Duration(overhead * float64(time.Second)))}
	}
	measured := [][]gangRun{{run(10, 0.7, 0.1, 0.01)}, {run(20, 0.9, 0.1, 0.03)}, {run(30, 0.8, 0.1, 0.02)}}
	for _, c := range []struct {
		name string
		cold gangRun
		lag  float64
	}{{"cold", run(0, 1.7, 0.1, 0.05), 0.9}, {"warm", run(0, 0.6, 0.1, 0.01), 0}} {
		pt, err := summarize([]gangRun{c.cold}, measured, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
		if !near(pt.Mean, 0.5) || !near(pt.Startup, 0.4) || !near(pt.Overhead, 0.02) || !near(pt.Lag, c.lag) {
			t.Fatalf("%s: mean %v, start-up %v, overhead %v, lag %v; want 0.5, 0.4, 0.02, %v", c.name, pt.Mean, pt.Startup, pt.Overhead, pt.Lag, c.lag)
		}
		// every launch kept, in round order
		allNear := func(got, want []float64) bool {
			return slices.EqualFunc(got, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-6 })
		}
		if !allNear(pt.Startups, []float64{0.3, 0.5, 0.4}) || !allNear(pt.Overheads, []float64{0.01, 0.03, 0.02}) || !allNear(pt.Lags, []float64{c.lag}) {
			t.Fatalf("%s: start-ups %v, overheads %v, lags %v", c.name, pt.Startups, pt.Overheads, pt.Lags)
		}
	}
}

// summarize with a contended round: the measured rounds launch one gang each (start-ups 0.4 s),
// the warm contended round four at once, queued 0.2 s apart (0.4, 0.6, 0.8 and 1 s: 0.3 s more
// on average, (4-1) x 0.2 / 2), and the cold round four at once 1 s later still: the contention
// is 0.2 s and each cold launch's lag is measured against the contended round's mean (0.7 s),
// not against the lone launches' (which would count the queue twice, as lag and contention).
func TestSummarizeContention(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	run := func(start, startup float64) gangRun { // an iteration every 0.5 s, no tail
		first := start + startup + 0.5
		at := []time.Time{sec(first), sec(first + 0.5), sec(first + 1)}
		return gangRun{start: sec(start), at: at, exited: at[2], saved: at[2]}
	}
	measured := [][]gangRun{{run(10, 0.4)}, {run(20, 0.4)}, {run(30, 0.4)}}
	var contended, cold []gangRun
	for i := range 4 {
		contended = append(contended, run(40, 0.4+0.2*float64(i)))
		cold = append(cold, run(0, 1.4+0.2*float64(i)))
	}
	pt, err := summarize(cold, measured, contended, 1)
	if err != nil {
		t.Fatal(err)
	}
	lags := []float64{0.7, 0.9, 1.1, 1.3}
	if math.Abs(pt.Contention-0.2) > 1e-6 || pt.Queued != 4 || math.Abs(pt.Startup-0.4) > 1e-6 ||
		!slices.EqualFunc(pt.Lags, lags, func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }) {
		t.Fatalf("contention %v over %d, start-up %v, lags %v; want 0.2 over 4, 0.4, %v", pt.Contention, pt.Queued, pt.Startup, pt.Lags, lags)
	}
	// No wider round: no contention measured, the lag against the lone launches.
	pt, err = summarize(cold, measured, nil, 1)
	if err != nil || pt.Queued != 0 || pt.Contention != 0 || math.Abs(pt.Lags[0]-1) > 1e-6 {
		t.Fatalf("without a contended round: contention %v over %d, lags %v (%v)", pt.Contention, pt.Queued, pt.Lags, err)
	}
}

// splitStart: each node's scale runs from the request to its RunningAt, its init from there to
// the Create's return (when its trials can start); a RunningAt outside the Create (unknown, or a
// replayed request's LaunchTime of before it) is clamped into it; spec seconds.
func TestSplitStart(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Second))) }
	nodes := []cloud.Node{{ID: "a", RunningAt: s(20)}, {ID: "b", RunningAt: s(22)}, {ID: "c"}, {ID: "d", RunningAt: s(-5)}, {ID: "e", RunningAt: s(40)}}
	got := splitStart(t0, s(30), nodes, 2)
	want := []nodeStart{{10, 5}, {11, 4}, {0, 15}, {0, 15}, {15, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("split %v, want %v", got, want)
	}
}

// deconvolve keeps the samples' mean and leaves them the variance that is not the noise's: 1 and
// 3 (variance 2) with noise of variance 1.5 become 1.5 and 2.5 (variance 0.5); noise that explains
// all of it leaves the mean alone; nothing goes below 0.
func TestDeconvolve(t *testing.T) {
	for _, c := range []struct {
		xs    []float64
		noise float64
		want  []float64
	}{
		{[]float64{1, 3}, 1.5, []float64{1.5, 2.5}},
		{[]float64{1, 3}, 0, []float64{1, 3}},
		{[]float64{1, 3}, 2, []float64{2, 2}},
		{[]float64{1, 3}, 9, []float64{2, 2}},
		{[]float64{-3, 1}, 0, []float64{0, 1}},
		{[]float64{0.7}, 0.1, []float64{0.7}},
	} {
		if got := deconvolve(c.xs, c.noise); !slices.EqualFunc(got, c.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
			t.Errorf("deconvolve(%v, %v) = %v, want %v", c.xs, c.noise, got, c.want)
		}
	}
}
