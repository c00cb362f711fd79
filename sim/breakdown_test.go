package sim

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim/meter"
	"github.com/rubberband-hpo/rubberband/spec"
)

// specCase is one example or test spec under one billing model.
type specCase struct {
	name     string
	exp      *spec.Experiment
	brackets []spec.Bracket
}

// specCases loads the example and test specs, each under its own billing and per-function.
func specCases(t *testing.T) []specCase {
	t.Helper()
	var paths []string
	for _, glob := range []string{"../examples/*.yaml", "../examples/paper/*.yaml", "../e2e/testdata/*.yaml", "../spec/testdata/*.yaml"} {
		p, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p...)
	}
	if len(paths) < 10 {
		t.Fatalf("found only %d specs: %v", len(paths), paths)
	}
	var cases []specCase
	for _, p := range paths {
		for _, fn := range []bool{false, true} {
			exp, err := spec.Load(p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			name := filepath.Base(p)
			if fn {
				exp.Cluster.Billing.Model = spec.PerFunction
				name += "/per-function"
			}
			cases = append(cases, specCase{name, exp, exp.Algorithm.Brackets()})
		}
	}
	return cases
}

// testAllocs are plans of several shapes that fit a spec: one GPU per trial, wide trials, a
// static cluster, waves, and a cluster that shrinks and grows again.
func testAllocs(m *Model, brackets []spec.Bracket) map[string]Alloc {
	budget := max(1, m.MaxNodes/len(brackets)) * m.GPUsPerNode
	perTrial := func(g int) func(int, spec.Stage) int {
		return func(_ int, st spec.Stage) int {
			if m.ValidTrialGPUs(g) && st.Trials*g <= budget {
				return st.Trials * g
			}
			return min(st.Trials, budget)
		}
	}
	shape := func(static bool, gpus func(k int, st spec.Stage) int) Alloc {
		a := make(Alloc, len(brackets))
		for b, br := range brackets {
			peak := 0
			for k, st := range br.Stages {
				g := gpus(k, st)
				a[b] = append(a[b], StageAlloc{GPUs: g, Nodes: m.NodesFor(g)})
				peak = max(peak, m.NodesFor(g))
			}
			if static {
				for k := range a[b] {
					a[b][k].Nodes = peak
				}
			}
		}
		return a
	}
	out := map[string]Alloc{
		"one GPU per trial": shape(false, perTrial(1)),
		"wide trials":       shape(false, perTrial(4)),
		"static":            shape(true, perTrial(2)),
		"waves":             shape(false, func(_ int, st spec.Stage) int { return max(1, min(st.Trials/3, budget)) }),
		"shrink and grow": shape(false, func(k int, st spec.Stage) int {
			return perTrial(1+3*(k%2))(k, st)
		}),
	}
	for name, a := range out {
		if m.Check(brackets, a) != nil {
			delete(out, name)
		}
	}
	return out
}

// referenceStageCosts is the simulator's per-stage split before the meter, frozen: node time
// within a stage to that stage, data of new nodes to the stage they arrive in, rounding to the
// stage whose SYNC releases the node, per-function TRAIN costs to their stage. It returns each
// stage's start, duration and cost in sample i.
func referenceStageCosts(m *Model, plans []stagePlan, i int) (startAcc, durAcc, costAcc []float64) {
	startAcc, durAcc, costAcc = make([]float64, len(plans)), make([]float64, len(plans)), make([]float64, len(plans))
	price := m.NodePricePerSecond
	var groups []group
	live := 0
	t := 0.0
	release := func(n, k int) {
		for n > 0 {
			g := &groups[len(groups)-1]
			rel := min(g.count, n)
			costAcc[k] += float64(rel)*m.Bill(g.billed, price) - float64(rel)*g.billed*price
			g.count -= rel
			n -= rel
			live -= rel
			if g.count == 0 {
				groups = groups[:len(groups)-1]
			}
		}
	}
	idle := uint64(0)
	for k, p := range plans {
		if !m.PerFunction && p.alloc.Nodes < live {
			release(live-p.alloc.Nodes, k-1)
		}
		v := p.version(i, idle)
		idle = v.idleAt(i)
		dur, scale := v.dur[i], 0.0
		if p.prov != nil {
			dur += p.prov.dur[i]
			scale = p.prov.scale[i]
		}
		stageCost := float64(p.newNodes)*m.DataCost + v.spotCostAt(i)
		if m.PerFunction {
			stageCost += v.fnCost[i]
		} else {
			if p.newNodes > 0 {
				groups = append(groups, group{count: p.newNodes, billed: -scale})
				live += p.newNodes
			}
			for j := range groups {
				groups[j].billed += dur
			}
			stageCost += price * (float64(live)*dur - float64(p.newNodes)*scale)
		}
		startAcc[k], durAcc[k], costAcc[k] = t, dur, costAcc[k]+stageCost
		t += dur
	}
	if !m.PerFunction && live > 0 {
		release(live, len(plans)-1)
	}
	return startAcc, durAcc, costAcc
}

func relNear(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

// Simulate's per-stage breakdown through the meter is the one it computed before, on every
// example and test spec, both billing models and plans of several shapes.
func TestBreakdownMatchesReference(t *testing.T) {
	const samples = 20
	for _, c := range specCases(t) {
		m, err := NewModel(c.exp)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for name, a := range testAllocs(m, c.brackets) {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				s := New(m, c.brackets, samples, 7)
				res, err := s.Simulate(a)
				if err != nil {
					t.Fatal(err)
				}
				for b := range c.brackets {
					plans := s.stagePlans(b, a[b])
					n := len(plans)
					start, dur, cost := make([]float64, n), make([]float64, n), make([]float64, n)
					for i := range samples {
						st, du, co := referenceStageCosts(m, plans, i)
						for k := range n {
							start[k] += st[k] / samples
							dur[k] += du[k] / samples
							cost[k] += co[k] / samples
						}
					}
					// The reference starts every bracket at 0; a later Hyperband round starts
					// where the one before it ended, its stages shifted by as much.
					offset := 0.0
					if h := c.exp.Algorithm.Hyperband; h != nil && h.Rounds > 1 {
						offset = res.Brackets[b].Stages[0].Start - start[0]
						if offset < 0 {
							t.Errorf("bracket %d starts at %v, before the run", b, offset)
						}
					}
					for k, got := range res.Brackets[b].Stages {
						if !relNear(got.Start-offset, start[k]) || !relNear(got.Duration, dur[k]) || !relNear(got.Cost, cost[k]) {
							t.Errorf("bracket %d stage %d: start %v duration %v cost %v, before the meter %v %v %v",
								b, k, got.Start, got.Duration, got.Cost, start[k], dur[k], cost[k])
						}
					}
				}
			})
		}
	}
}

// In every sample the meter's stage costs add up to the cost the planners' hot path computes,
// and the meter's total is that cost.
func TestBreakdownAddsUpPerSample(t *testing.T) {
	const samples = 20
	for _, c := range specCases(t) {
		m, err := NewModel(c.exp)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for name, a := range testAllocs(m, c.brackets) {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				s := New(m, c.brackets, samples, 3)
				var tl timeline
				for b := range c.brackets {
					plans := s.stagePlans(b, a[b])
					var launches []stageLaunches
					if m.PerFunction {
						launches = s.trainLaunches(b, a[b])
					}
					for i := range samples {
						jct, cost := s.sampleBracket(plans, i)
						s.layout(b, plans, launches, i, &tl)
						bill, err := meter.Bill(m.Rules, tl.nodes, tl.launches, tl.windows)
						if err != nil {
							t.Fatal(err)
						}
						sum, spot := 0.0, 0.0
						for k := range plans {
							spot += tl.versions[k].spotCostAt(i)
							sum += bill.Stages[meter.StageKey{Bracket: b, Stage: k}] + tl.versions[k].spotCostAt(i)
						}
						bill.Total += spot
						last := tl.windows[len(tl.windows)-1].Sync
						if !relNear(sum, cost) || !relNear(bill.Total, cost) || len(bill.Stages) != len(plans) || last != jct {
							t.Fatalf("bracket %d sample %d: stages add up to %v, meter total %v, hot path %v; %d stages; last sync %v, JCT %v",
								b, i, sum, bill.Total, cost, len(bill.Stages), last, jct)
						}
					}
				}
			})
		}
	}
}

// Three stages by hand through a spec: a node at $36/h ($0.01/s), a 1 s increment, a 60 s
// minimum, a 2 GB dataset at $0.25/GB ($0.50 per new node, 2 s at 8 Gbps). Stage 0 holds two
// nodes, stage 1 one, stage 2 two again.
func TestStageCostsByHand(t *testing.T) {
	s := job(t, "{stages: [{trials: 8, iters: 1}, {trials: 4, iters: 1}, {trials: 2, iters: 1}]}",
		"{gpus_per_node: 4, price_per_hour: 36, billing: {increment: 1s, minimum: 60s}, network_gbps: 8, data: {size_gb: 2, price_per_gb: 0.25}, scale_latency: {value: 10s}, init_latency: {value: 20.25s}}",
		"{iter_latency: {1: {dist: constant, value: 40}, 4: {dist: constant, value: 12}}, startup_latency: {value: 0s}}", 2, 1)
	// Stage 0: SCALE 10, INIT 20.25, DATA 2, 8 trials x 40 s: 0-72.25. Nodes A and B run
	// from 10; B is released at stage 0's sync: 62.25 s billed 63 (+0.75 s, stage 0's).
	// Stage 1: 4 trials x 40 s on A: 72.25-112.25.
	// Stage 2: 2 trials x 4 GPUs, one new node C: SCALE 10, INIT 20.25, DATA 2, then 12 s:
	// 112.25-156.5. A: 146.5 s billed 147 (+0.5 s, stage 2's); C from 122.25: 34.25 s,
	// billed the 60 s minimum (+25.75 s, stage 2's).
	res, err := s.Simulate(Alloc{{{GPUs: 8, Nodes: 2}, {GPUs: 4, Nodes: 1}, {GPUs: 8, Nodes: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{
		(62.25+62.25+0.75)*0.01 + 2*0.5, // A and B, B's rounding, two datasets
		40 * 0.01,                       // A
		(44.25+0.5+34.25+25.75)*0.01 + 0.5,
	}
	for k, st := range res.Brackets[0].Stages {
		if !near(st.Cost, want[k], 1e-12) {
			t.Errorf("stage %d costs %v, want %v", k, st.Cost, want[k])
		}
	}
	// Billed 147 + 63 + 60 s and three datasets.
	if total := 270*0.01 + 3*0.5; !near(res.Cost.Mean, total, 1e-12) || !near(want[0]+want[1]+want[2], total, 1e-12) {
		t.Errorf("total %v, want %v", res.Cost.Mean, total)
	}
}
