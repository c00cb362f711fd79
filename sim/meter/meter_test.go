package meter

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

func checkStages(t *testing.T, got Breakdown, total float64, want map[StageKey]float64) {
	t.Helper()
	if !near(got.Total, total) {
		t.Errorf("total %v, want %v", got.Total, total)
	}
	if len(got.Stages) != len(want) {
		t.Errorf("stages %v, want %v", got.Stages, want)
	}
	for k, w := range want {
		if g, ok := got.Stages[k]; !ok || !near(g, w) {
			t.Errorf("bracket %d stage %d: %v, want %v", k.Bracket, k.Stage, g, w)
		}
	}
}

// Two stages worked out by hand: a node at $0.01/s, a 1 s increment, a 60 s minimum, and a
// 2 GB dataset at $0.25/GB ($0.50 per node). Stage 0 runs 0-100 s, stage 1 100-250 s.
func TestHandComputedTwoStages(t *testing.T) {
	rules := Rules{Increment: 1, Minimum: 60, DataCost: 2 * 0.25}
	const p = 0.01
	nodes := []NodeSpan{
		// Held through both stages: 90 s in stage 0, 150 s in stage 1, 240 s needs no rounding.
		{Bracket: 0, RunningFrom: 10, ReleasedAt: 250, PricePerSecond: p},
		// Released at the first sync: 87.5 s, billed 88 s; the 0.5 s of rounding is stage 0's.
		{Bracket: 0, RunningFrom: 12.5, ReleasedAt: 100, PricePerSecond: p},
		// New in stage 1: 134.75 s billed 135 s, all stage 1's, and its data.
		{Bracket: 0, RunningFrom: 115.25, ReleasedAt: 250, PricePerSecond: p},
		// New in stage 1 and lost after 30 s: raised to the 60 s minimum.
		{Bracket: 0, RunningFrom: 140, ReleasedAt: 170, PricePerSecond: p},
	}
	windows := []StageWindow{{Bracket: 0, Stage: 1, Start: 100, Sync: 250}, {Bracket: 0, Stage: 0, Start: 0, Sync: 100}}
	got, err := Bill(rules, nodes, nil, windows)
	if err != nil {
		t.Fatal(err)
	}
	// Stage 0: 0.90 + 0.50 data (first node) + 0.875 + 0.005 rounding + 0.50 data (second).
	// Stage 1: 1.50 (first node) + 1.3475 + 0.0025 + 0.50 (third) + 0.30 + 0.30 + 0.50 (fourth).
	// Total: billed 240 + 88 + 135 + 60 s at $0.01 = 5.23, and four datasets: 7.23.
	checkStages(t, got, 7.23, map[StageKey]float64{{0, 0}: 2.78, {0, 1}: 4.45})
}

func TestSplitRule(t *testing.T) {
	flat := Rules{}
	for _, tc := range []struct {
		name     string
		rules    Rules
		nodes    []NodeSpan
		launches []LaunchSpan
		windows  []StageWindow
		total    float64
		want     map[StageKey]float64
	}{{
		// 5 s before the first start, 10 in stage 0, 20 in stage 1, 20 + 15 after the last sync.
		name:    "node spanning three stages",
		rules:   flat,
		nodes:   []NodeSpan{{RunningFrom: 5, ReleasedAt: 75, PricePerSecond: 1}},
		windows: []StageWindow{{0, 0, 10, 20}, {0, 1, 20, 40}, {0, 2, 40, 60}},
		total:   70,
		want:    map[StageKey]float64{{0, 0}: 15, {0, 1}: 20, {0, 2}: 35},
	}, {
		// The gap between stage 0's sync (10) and stage 1's start (12) is stage 0's, and so is
		// the rounding of a node released in it (11 s billed 60 s). The second node's 15 s are
		// split 7 and 8, its rounding (45 s) goes to stage 1, where it is released.
		name:    "gap after a sync",
		rules:   Rules{Minimum: 60},
		nodes:   []NodeSpan{{RunningFrom: 0, ReleasedAt: 11, PricePerSecond: 1}, {RunningFrom: 5, ReleasedAt: 20, PricePerSecond: 1}},
		windows: []StageWindow{{0, 0, 0, 10}, {0, 1, 12, 30}},
		total:   120,
		want:    map[StageKey]float64{{0, 0}: 60 + 7, {0, 1}: 8 + 45},
	}, {
		// Released at 100, where stage 0 syncs and stage 1 starts: stage 0's rounding. Running
		// from 100: stage 1's data.
		name:    "boundaries",
		rules:   Rules{Increment: 60, DataCost: 1},
		nodes:   []NodeSpan{{RunningFrom: 70, ReleasedAt: 100, PricePerSecond: 1}, {RunningFrom: 100, ReleasedAt: 110, PricePerSecond: 1}},
		windows: []StageWindow{{0, 0, 0, 100}, {0, 1, 100, 200}},
		total:   60 + 60 + 2,
		want:    map[StageKey]float64{{0, 0}: 30 + 30 + 1, {0, 1}: 10 + 50 + 1},
	}, {
		// Brackets keep their own clocks and their own stages, and each node its own price.
		name:  "two brackets",
		rules: flat,
		nodes: []NodeSpan{{Bracket: 0, RunningFrom: 0, ReleasedAt: 30, PricePerSecond: 1}, {Bracket: 1, RunningFrom: 0, ReleasedAt: 30, PricePerSecond: 2}},
		windows: []StageWindow{{0, 0, 0, 10}, {0, 1, 10, 30},
			{1, 0, 0, 20}, {1, 1, 20, 25}, {1, 2, 25, 30}},
		total: 90,
		want:  map[StageKey]float64{{0, 0}: 10, {0, 1}: 20, {1, 0}: 40, {1, 1}: 10, {1, 2}: 10},
	}, {
		// A run still in stage 1: its sync is +Inf, and a node still held is released now.
		name:    "still running",
		rules:   flat,
		nodes:   []NodeSpan{{RunningFrom: 0, ReleasedAt: 42, PricePerSecond: 1}},
		windows: []StageWindow{{0, 0, 0, 30}, {0, 1, 30, math.Inf(1)}},
		total:   42,
		want:    map[StageKey]float64{{0, 0}: 30, {0, 1}: 12},
	}, {
		// Per-function, $0.001 per GPU-second, 1 s increment, 60 s minimum, $0.50 of data per
		// node: 2 GPUs x 40.5 s -> 60 s = 0.12 and 4 GPUs x 40 s -> 60 s = 0.24 start in stage
		// 0 (the second ends in stage 1); 1 GPU x 100 s = 0.10 starts at 100, in stage 1. Nodes
		// pay only data: one running from 5 (stage 0), one from 100 (stage 1).
		name:  "per function",
		rules: Rules{PerFunction: true, Increment: 1, Minimum: 60, DataCost: 0.5},
		nodes: []NodeSpan{{RunningFrom: 5, ReleasedAt: 200, PricePerSecond: 1}, {RunningFrom: 100, ReleasedAt: 200, PricePerSecond: 1}},
		launches: []LaunchSpan{
			{Start: 10, End: 50.5, GPUs: 2, PricePerGPUSecond: 0.001},
			{Start: 100, End: 200, GPUs: 1, PricePerGPUSecond: 0.001},
			{Start: 90, End: 130, GPUs: 4, PricePerGPUSecond: 0.001},
		},
		windows: []StageWindow{{0, 0, 0, 100}, {0, 1, 100, 200}},
		total:   0.12 + 0.10 + 0.24 + 1,
		want:    map[StageKey]float64{{0, 0}: 0.12 + 0.24 + 0.5, {0, 1}: 0.10 + 0.5},
	}, {
		name:     "per instance ignores launches",
		rules:    flat,
		nodes:    []NodeSpan{{RunningFrom: 0, ReleasedAt: 10, PricePerSecond: 1}},
		launches: []LaunchSpan{{Start: 0, End: 10, GPUs: 4, PricePerGPUSecond: 1}},
		windows:  []StageWindow{{0, 0, 0, 10}},
		total:    10,
		want:     map[StageKey]float64{{0, 0}: 10},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Bill(tc.rules, tc.nodes, tc.launches, tc.windows)
			if err != nil {
				t.Fatal(err)
			}
			checkStages(t, got, tc.total, tc.want)
		})
	}
}

func TestBillRejects(t *testing.T) {
	ok := []StageWindow{{0, 0, 0, 10}}
	for _, tc := range []struct {
		name     string
		nodes    []NodeSpan
		launches []LaunchSpan
		windows  []StageWindow
		err      string
	}{
		{"node without windows", []NodeSpan{{Bracket: 1, ReleasedAt: 1}}, nil, ok, "bracket 1 has no stage window"},
		{"launch without windows", nil, []LaunchSpan{{Bracket: 2, End: 1}}, ok, "bracket 2 has no stage window"},
		{"node released before running", []NodeSpan{{RunningFrom: 5, ReleasedAt: 4}}, nil, ok, "before running"},
		{"launch ending before its start", nil, []LaunchSpan{{Start: 5, End: 4}}, ok, "before its start"},
		{"NaN", []NodeSpan{{RunningFrom: math.NaN(), ReleasedAt: 4}}, nil, ok, "before running"},
		{"sync before start", nil, nil, []StageWindow{{0, 0, 10, 5}}, "before its start"},
		{"overlapping stages", nil, nil, []StageWindow{{0, 0, 0, 10}, {0, 1, 9, 20}}, "before stage 0's sync"},
		{"two windows", nil, nil, []StageWindow{{0, 0, 0, 10}, {0, 0, 10, 20}}, "two windows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Bill(Rules{}, tc.nodes, tc.launches, tc.windows)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// On random brackets, stages, nodes and launches under random rules, the stages add up to the
// total, and the total is every node's and launch's own charge.
func TestStagesAddUpToTotal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		rules := Rules{PerFunction: r.IntN(2) == 0, Increment: float64(r.IntN(3)) * 30 * r.Float64(), Minimum: float64(r.IntN(2)) * 120 * r.Float64(), DataCost: r.Float64()}
		var windows []StageWindow
		brackets := 1 + r.IntN(3)
		for b := range brackets {
			t := 100 * r.Float64()
			for k := range 1 + r.IntN(5) {
				start := t
				if r.IntN(3) == 0 {
					start += 10 * r.Float64() // a gap after the previous sync
				}
				t = start + 100*r.Float64()*float64(r.IntN(4)) // zero-length stages too
				windows = append(windows, StageWindow{Bracket: b, Stage: k, Start: start, Sync: t})
			}
		}
		// Spans start and end anywhere, stage boundaries included.
		instant := func() float64 {
			if r.IntN(4) == 0 {
				w := windows[r.IntN(len(windows))]
				return []float64{w.Start, w.Sync}[r.IntN(2)]
			}
			return 600 * r.Float64()
		}
		var nodes []NodeSpan
		var launches []LaunchSpan
		want := 0.0
		for range r.IntN(20) {
			a, b := instant(), instant()
			n := NodeSpan{Bracket: r.IntN(brackets), RunningFrom: min(a, b), ReleasedAt: max(a, b), PricePerSecond: r.Float64()}
			nodes = append(nodes, n)
			want += rules.DataCost
			if !rules.PerFunction {
				want += rules.Charge(n.ReleasedAt-n.RunningFrom, n.PricePerSecond)
			}
		}
		for range r.IntN(20) {
			a, b := instant(), instant()
			l := LaunchSpan{Bracket: r.IntN(brackets), Start: min(a, b), End: max(a, b), GPUs: 1 + r.IntN(8), PricePerGPUSecond: r.Float64()}
			launches = append(launches, l)
			if rules.PerFunction {
				want += float64(l.GPUs) * rules.Charge(l.End-l.Start, l.PricePerGPUSecond)
			}
		}
		got, err := Bill(rules, nodes, launches, windows)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		sum := 0.0
		for _, c := range got.Stages {
			if c < -1e-6 { // rounding may be a hair below zero: Charge's slack
				t.Fatalf("case %d: a stage costs %v", i, c)
			}
			sum += c
		}
		if !near(sum, got.Total) || !near(got.Total, want) || len(got.Stages) != len(windows) {
			t.Fatalf("case %d: stages add up to %v, total %v, want %v; %d stages for %d windows", i, sum, got.Total, want, len(got.Stages), len(windows))
		}
	}
}

func TestCharge(t *testing.T) {
	for _, tc := range []struct {
		rules Rules
		t     float64
		want  float64
	}{
		{Rules{}, 12.3, 12.3},
		{Rules{Increment: 1}, 12.3, 13},
		{Rules{Increment: 1}, 12 + 1e-12, 12}, // float error does not buy an increment
		{Rules{Increment: 60, Minimum: 60}, 0, 60},
		{Rules{Increment: 1, Minimum: 60}, 59.2, 60},
		{Rules{Increment: 1, Minimum: 60}, 60.2, 61},
	} {
		if got := tc.rules.Charge(tc.t, 2); !near(got, 2*tc.want) {
			t.Errorf("%+v: %v s charged %v, want %v", tc.rules, tc.t, got, 2*tc.want)
		}
	}
}
