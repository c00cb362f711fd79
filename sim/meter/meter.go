package meter

import (
	"fmt"
	"math"
	"sort"
)

// Rules are the billing rules of a cluster.
type Rules struct {
	// PerFunction bills launches (GPU-seconds) instead of nodes (instance-seconds).
	PerFunction bool
	// Increment and Minimum round each billed span, in seconds: per node, or per launch.
	Increment, Minimum float64
	// DataCost is what each node pays once for the dataset it downloads, in dollars.
	DataCost float64
}

// Charge is what a span of t seconds costs at a price per second: t rounded up to the
// increment, and at least the minimum. The slack of 1e-9 increments keeps a span that is a
// whole number of increments but for float error from paying one more.
func (r Rules) Charge(t, pricePerSecond float64) float64 {
	if r.Increment > 0 {
		t = math.Ceil(t/r.Increment-1e-9) * r.Increment
	}
	return math.Max(t, r.Minimum) * pricePerSecond
}

// NodeSpan is one node held by a bracket. It carries its own price, so that nodes of several
// instance types or spot prices bill side by side.
type NodeSpan struct {
	Bracket int
	// RunningFrom is when the node started running (billing starts, before initialisation);
	// ReleasedAt when it was released, or now for a node still held.
	RunningFrom, ReleasedAt float64
	PricePerSecond          float64
	// Paid is how many seconds of the node's time another bill has charged already: a node a
	// prediction finds held was billed by the run's meter up to now, its minimum included. The
	// node then costs what its Paid seconds and its span cost together, less what Paid alone did.
	Paid float64
}

// chargeSpan is what n's span costs under r, less what was Paid for it already.
func (r Rules) chargeSpan(n NodeSpan) float64 {
	c := r.Charge(n.Paid+n.ReleasedAt-n.RunningFrom, n.PricePerSecond)
	if n.Paid > 0 {
		c -= r.Charge(n.Paid, n.PricePerSecond)
	}
	return c
}

// LaunchSpan is one TRAIN launch of a bracket's trial, billed per function.
type LaunchSpan struct {
	Bracket           int
	Start, End        float64
	GPUs              int
	PricePerGPUSecond float64
}

// StageWindow is one stage of a bracket: from its start to its SYNC. A stage still running
// gives now (or +Inf) as its SYNC; stages not started yet are left out.
type StageWindow struct {
	Bracket, Stage int
	Start, Sync    float64
}

// StageKey names a stage of a bracket.
type StageKey struct{ Bracket, Stage int }

// Breakdown is a bill: the total and its split among stages, which add up to the total.
type Breakdown struct {
	Total  float64
	Stages map[StageKey]float64 // every stage with a window, zero-cost ones included
}

// Bill prices nodes and launches under the rules and splits the total among the stage windows
// by the package's rule. Every bracket with a node or a launch needs at least one window.
func Bill(r Rules, nodes []NodeSpan, launches []LaunchSpan, stages []StageWindow) (Breakdown, error) {
	clocks, err := clocksOf(stages)
	if err != nil {
		return Breakdown{}, fmt.Errorf("bill: %w", err)
	}
	var total float64
	for i, n := range nodes {
		c := clocks[n.Bracket]
		if c == nil {
			return Breakdown{}, fmt.Errorf("bill: node %d: bracket %d has no stage window", i, n.Bracket)
		}
		if !(n.ReleasedAt >= n.RunningFrom) {
			return Breakdown{}, fmt.Errorf("bill: node %d: released at %v, before running at %v", i, n.ReleasedAt, n.RunningFrom)
		}
		total += r.DataCost
		c.cost[c.beginning(n.RunningFrom)] += r.DataCost
		if r.PerFunction {
			continue
		}
		t := n.ReleasedAt - n.RunningFrom
		billed := r.chargeSpan(n)
		total += billed
		c.spread(n.RunningFrom, n.ReleasedAt, n.PricePerSecond)
		c.cost[c.ending(n.ReleasedAt)] += billed - t*n.PricePerSecond
	}
	for i, l := range launches {
		c := clocks[l.Bracket]
		if c == nil {
			return Breakdown{}, fmt.Errorf("bill: launch %d: bracket %d has no stage window", i, l.Bracket)
		}
		if !(l.End >= l.Start) {
			return Breakdown{}, fmt.Errorf("bill: launch %d: ends at %v, before its start at %v", i, l.End, l.Start)
		}
		if !r.PerFunction {
			continue
		}
		billed := float64(l.GPUs) * r.Charge(l.End-l.Start, l.PricePerGPUSecond)
		total += billed
		c.cost[c.beginning(l.Start)] += billed
	}
	out := Breakdown{Total: total, Stages: make(map[StageKey]float64, len(stages))}
	for b, c := range clocks {
		for i, k := range c.stages {
			out.Stages[StageKey{b, k}] = c.cost[i]
		}
	}
	return out, nil
}

// clock is one bracket's stages in order: stage i owns [starts[i], starts[i+1]), the first
// from -Inf and the last to +Inf.
type clock struct {
	stages []int
	starts []float64
	cost   []float64
}

func clocksOf(windows []StageWindow) (map[int]*clock, error) {
	by := map[int][]StageWindow{}
	for _, w := range windows {
		by[w.Bracket] = append(by[w.Bracket], w)
	}
	clocks := make(map[int]*clock, len(by))
	for b, ws := range by {
		sort.Slice(ws, func(i, j int) bool { return ws[i].Stage < ws[j].Stage })
		c := &clock{cost: make([]float64, len(ws))}
		for i, w := range ws {
			if i > 0 && w.Stage == ws[i-1].Stage {
				return nil, fmt.Errorf("bracket %d stage %d: two windows", b, w.Stage)
			}
			if !(w.Sync >= w.Start) {
				return nil, fmt.Errorf("bracket %d stage %d: sync at %v, before its start at %v", b, w.Stage, w.Sync, w.Start)
			}
			if i > 0 && !(w.Start >= ws[i-1].Sync) {
				return nil, fmt.Errorf("bracket %d stage %d: starts at %v, before stage %d's sync at %v", b, w.Stage, w.Start, ws[i-1].Stage, ws[i-1].Sync)
			}
			c.stages = append(c.stages, w.Stage)
			c.starts = append(c.starts, w.Start)
		}
		clocks[b] = c
	}
	return clocks, nil
}

// beginning is the piece an instant that begins something belongs to: the last piece starting
// at or before it.
func (c *clock) beginning(t float64) int {
	i := 0
	for i+1 < len(c.starts) && c.starts[i+1] <= t {
		i++
	}
	return i
}

// ending is the piece an instant that ends something belongs to: the last piece starting
// strictly before it.
func (c *clock) ending(t float64) int {
	i := 0
	for i+1 < len(c.starts) && c.starts[i+1] < t {
		i++
	}
	return i
}

// spread charges the time from `from` to `to` at a price to the pieces it overlaps.
func (c *clock) spread(from, to, price float64) {
	for i := range c.starts {
		lo, hi := from, to
		if i > 0 {
			lo = max(lo, c.starts[i])
		}
		if i+1 < len(c.starts) {
			hi = min(hi, c.starts[i+1])
		}
		if hi > lo {
			c.cost[i] += (hi - lo) * price
		}
	}
}
