package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/rubberband-hpo/rubberband/sim/meter"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Simulator predicts plans of one experiment. It draws each stage's samples once per allocation
// and keeps them, so evaluating many plans (as a planner does) costs little more than adding up
// stages. It is not safe for concurrent use.
type Simulator struct {
	m        *Model
	brackets []spec.Bracket
	samples  int
	seed     int64
	train    map[stageKey]*trainSamples
	prov     map[stageKey]*provSamples
	groups   []group
}

type stageKey struct{ b, k, x int }

// trainSamples are the draws of a stage's TRAIN nodes and SYNC at one GPU allocation.
type trainSamples struct {
	dur    []float64 // critical path from the stage's start (cluster ready) to its SYNC
	fnCost []float64 // per-function compute cost of the stage's TRAIN nodes
	// spotCost is what spot interruptions add to the stage's cost beyond its longer duration
	// (each replacement's dataset, less its unbilled SCALE); interrupted counts them. Nil
	// without a spot model.
	spotCost    []float64
	interrupted []float64
}

// provSamples are the draws of a stage's scale-up by some number of new nodes.
type provSamples struct {
	dur   []float64 // SCALE, then the slowest INIT_INSTANCE+DATA
	scale []float64 // SCALE alone: new nodes are billed from its end
}

// group is a set of nodes started together and still held, with the seconds billed so far.
type group struct {
	count  int
	billed float64
}

// New returns a simulator that draws samples per stage with the given seed.
func New(m *Model, brackets []spec.Bracket, samples int, seed int64) *Simulator {
	return &Simulator{m: m, brackets: brackets, samples: max(samples, 1), seed: seed,
		train: map[stageKey]*trainSamples{}, prov: map[stageKey]*provSamples{}}
}

// Model returns the simulator's model.
func (s *Simulator) Model() *Model { return s.m }

// Brackets returns the brackets the simulator plans for.
func (s *Simulator) Brackets() []spec.Bracket { return s.brackets }

// Samples is the number of Monte Carlo samples per prediction.
func (s *Simulator) Samples() int { return s.samples }

// streams separates the random streams of different parts of the model.
const (
	streamTrain = iota + 1
	streamProvision
	streamSpot
	streamSlow
)

func (s *Simulator) stream(kind, b, k, x int) uint64 {
	z := uint64(kind)<<56 ^ uint64(b)<<40 ^ uint64(k)<<24 ^ uint64(x)
	// splitmix64 finaliser: nearby keys get unrelated streams.
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (s *Simulator) trainPart(b, k int, a StageAlloc) *trainSamples {
	key := stageKey{b, k, a.GPUs}
	if t, ok := s.train[key]; ok {
		return t
	}
	t := &trainSamples{dur: make([]float64, s.samples), fnCost: make([]float64, s.samples)}
	if s.m.Spot != nil {
		t.spotCost, t.interrupted = make([]float64, s.samples), make([]float64, s.samples)
	}
	gpuPrice := s.m.GPUPricePerSecond()
	s.drawTrain(b, k, a, func(i int, g *DAG, end float64, hit interruptions, _, latency []float64) {
		t.dur[i] = end
		if t.spotCost != nil {
			t.interrupted[i] = float64(hit.count)
			t.spotCost[i] = float64(hit.count)*s.m.DataCost - hit.unbilled*s.m.NodePricePerSecond
		}
		if s.m.PerFunction {
			for j, n := range g.Nodes {
				if n.Kind == Train {
					t.fnCost[i] += float64(n.GPUs) * s.m.Bill(latency[j], gpuPrice)
				}
			}
		}
	})
	s.train[key] = t
	return t
}

// drawTrain draws a stage's TRAIN nodes and SYNC sample by sample from the stage's own stream,
// with the spot interruptions that hit them (from a stream of their own, so that the same
// stage draws the same TRAIN latencies with and without them), and hands each sample's DAG,
// end, interruptions and every node's latency to each. The same stage and allocation always
// give the same draws.
func (s *Simulator) drawTrain(b, k int, a StageAlloc, each func(i int, g *DAG, end float64, hit interruptions, finish, latency []float64)) {
	g := &DAG{}
	st := s.brackets[b].Stages[k]
	g.addTrain(b, k, st, a, nil)
	r := spec.NewRand(s.seed, s.stream(streamTrain, b, k, a.GPUs))
	var rs, rslow *rand.Rand
	if s.m.Spot != nil {
		rs = spec.NewRand(s.seed, s.stream(streamSpot, b, k, a.GPUs))
	}
	if s.m.SlowShare > 0 && s.m.SlowFactor > 1 {
		rslow = spec.NewRand(s.seed, s.stream(streamSlow, b, k, a.GPUs))
	}
	gpt := GPUsPerTrial(st, a)
	finish, latency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	for i := range s.samples {
		end := g.CriticalPath(s.m, r, finish, latency)
		if rslow != nil {
			end = s.m.slowDown(g, a.Nodes, gpt, rslow, finish, latency)
		}
		var hit interruptions
		if rs != nil {
			end, hit = s.m.interrupt(g, a.Nodes, gpt, rs, finish, latency)
		}
		each(i, g, end, hit, finish, latency)
	}
}

// trainLaunches replays each stage's TRAIN draws (trainPart's) as launch spans: per stage, per
// sample, one span per TRAIN node, timed from the stage's TRAIN start. Per-function billing
// needs them; the planners' hot path gets by with trainPart's sums.
func (s *Simulator) trainLaunches(b int, a []StageAlloc) [][][]meter.LaunchSpan {
	price := s.m.GPUPricePerSecond()
	out := make([][][]meter.LaunchSpan, len(a))
	for k, sa := range a {
		out[k] = make([][]meter.LaunchSpan, s.samples)
		s.drawTrain(b, k, sa, func(i int, g *DAG, _ float64, _ interruptions, finish, latency []float64) {
			for j, n := range g.Nodes {
				if n.Kind == Train {
					out[k][i] = append(out[k][i], meter.LaunchSpan{Bracket: b, Start: finish[j] - latency[j], End: finish[j], GPUs: n.GPUs, PricePerGPUSecond: price})
				}
			}
		})
	}
	return out
}

func (s *Simulator) provPart(b, k, newNodes int) *provSamples {
	key := stageKey{b, k, newNodes}
	if p, ok := s.prov[key]; ok {
		return p
	}
	g := &DAG{}
	g.addProvision(s.m, b, k, newNodes, nil)
	r := spec.NewRand(s.seed, s.stream(streamProvision, b, k, newNodes))
	p := &provSamples{dur: make([]float64, s.samples), scale: make([]float64, s.samples)}
	finish, latency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	for i := range p.dur {
		p.dur[i] = g.CriticalPath(s.m, r, finish, latency)
		p.scale[i] = latency[0]
	}
	s.prov[key] = p
	return p
}

// stagePlan is one stage's share of an evaluation: its draws and how many nodes it adds.
type stagePlan struct {
	alloc    StageAlloc
	newNodes int
	train    *trainSamples
	prov     *provSamples
}

// spotCost is what spot interruptions add to sample i of the stage beyond its longer duration,
// which the meter does not see: the replacements' datasets, less their unbilled SCALE.
func (p stagePlan) spotCost(i int) float64 {
	if p.train.spotCost == nil {
		return 0
	}
	return p.train.spotCost[i]
}

func (s *Simulator) stagePlans(b int, a []StageAlloc) []stagePlan {
	plans := make([]stagePlan, len(a))
	up := 0
	for k, sa := range a {
		plans[k] = stagePlan{alloc: sa, train: s.trainPart(b, k, sa)}
		if sa.Nodes > up {
			plans[k].newNodes = sa.Nodes - up
			plans[k].prov = s.provPart(b, k, sa.Nodes-up)
		}
		up = sa.Nodes
	}
	return plans
}

// Outcome is one prediction, sample by sample.
type Outcome struct {
	JCT  []float64
	Cost []float64
}

// Evaluate predicts an allocation's JCT and cost, per sample. The allocation must pass Check.
func (s *Simulator) Evaluate(a Alloc) Outcome {
	out := Outcome{JCT: make([]float64, s.samples), Cost: make([]float64, s.samples)}
	for b := range a {
		ob := s.EvaluateBracket(b, a[b])
		for i := range out.JCT {
			out.JCT[i] = max(out.JCT[i], ob.JCT[i])
			out.Cost[i] += ob.Cost[i]
		}
	}
	return out
}

// sampleBracket walks one bracket's stages for sample i and returns its JCT and cost. It is the
// planners' inner loop, so it keeps the total alone: nodes held are grouped by when they
// started, and each group is billed when released, newest first. Simulate's per-stage split
// lays the same sample out for the meter instead (layout); a test holds the two to one total.
func (s *Simulator) sampleBracket(plans []stagePlan, i int) (float64, float64) {
	m := s.m
	price := m.NodePricePerSecond
	groups := s.groups[:0]
	live := 0
	t, total := 0.0, 0.0
	release := func(n int) { // release n nodes, newest first
		for n > 0 {
			g := &groups[len(groups)-1]
			rel := min(g.count, n)
			total += float64(rel) * m.Bill(g.billed, price)
			g.count -= rel
			n -= rel
			live -= rel
			if g.count == 0 {
				groups = groups[:len(groups)-1]
			}
		}
	}
	for _, p := range plans {
		if !m.PerFunction && p.alloc.Nodes < live {
			release(live - p.alloc.Nodes)
		}
		dur, scale := p.train.dur[i], 0.0
		if p.prov != nil {
			dur += p.prov.dur[i]
			scale = p.prov.scale[i]
		}
		total += p.spotCost(i)
		if m.PerFunction {
			total += float64(p.newNodes)*m.DataCost + p.train.fnCost[i]
		} else {
			total += float64(p.newNodes) * m.DataCost
			if p.newNodes > 0 {
				groups = append(groups, group{count: p.newNodes, billed: -scale})
				live += p.newNodes
			}
			for j := range groups {
				groups[j].billed += dur
			}
		}
		t += dur
	}
	if !m.PerFunction && live > 0 {
		release(live)
	}
	s.groups = groups
	return t, total
}

// timeline is one sample of a bracket laid out for the meter, on a clock from the run's start.
type timeline struct {
	windows  []meter.StageWindow
	nodes    []meter.NodeSpan
	launches []meter.LaunchSpan
	held     []int // the nodes held, oldest first, as indices into nodes
}

// layout lays out sample i of bracket b as sampleBracket walks it: stage k's window runs from
// the previous SYNC to its own; a new node runs from the end of its SCALE until the SYNC after
// which the plan no longer needs it (newest first) or the bracket's last SYNC; under
// per-function billing each TRAIN node is a launch, from launches (trainLaunches), shifted to
// its stage's TRAIN start.
func (s *Simulator) layout(b int, plans []stagePlan, launches [][][]meter.LaunchSpan, i int, tl *timeline) {
	tl.windows, tl.nodes, tl.launches, tl.held = tl.windows[:0], tl.nodes[:0], tl.launches[:0], tl.held[:0]
	t := 0.0
	release := func(keep int) {
		for len(tl.held) > keep {
			tl.nodes[tl.held[len(tl.held)-1]].ReleasedAt = t
			tl.held = tl.held[:len(tl.held)-1]
		}
	}
	for k, p := range plans {
		release(p.alloc.Nodes)
		dur, ready, scale := p.train.dur[i], 0.0, 0.0
		if p.prov != nil {
			ready, scale = p.prov.dur[i], p.prov.scale[i]
			dur += ready
		}
		for range p.newNodes {
			tl.held = append(tl.held, len(tl.nodes))
			tl.nodes = append(tl.nodes, meter.NodeSpan{Bracket: b, RunningFrom: t + scale, PricePerSecond: s.m.NodePricePerSecond})
		}
		if launches != nil {
			for _, l := range launches[k][i] {
				l.Start, l.End = t+ready+l.Start, t+ready+l.End
				tl.launches = append(tl.launches, l)
			}
		}
		tl.windows = append(tl.windows, meter.StageWindow{Bracket: b, Stage: k, Start: t, Sync: t + dur})
		t += dur
	}
	release(0)
}

// Summary describes a distribution of samples.
type Summary struct {
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	P5   float64 `json:"p5"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
}

// Summarize computes mean, standard deviation and the 5th, 50th and 95th percentiles.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	std := 0.0
	if len(xs) > 1 {
		std = math.Sqrt(ss / float64(len(xs)-1))
	}
	sorted := append([]float64(nil), xs...)
	sort.Float64s(sorted)
	return Summary{Mean: mean, Std: std, P5: quantileSorted(sorted, 0.05), P50: quantileSorted(sorted, 0.5), P95: quantileSorted(sorted, 0.95)}
}

// Quantile is the nearest-rank q-quantile of xs: the smallest sample with at least q of the
// samples at or below it.
func Quantile(xs []float64, q float64) float64 {
	sorted := append([]float64(nil), xs...)
	sort.Float64s(sorted)
	return quantileSorted(sorted, q)
}

func quantileSorted(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// MissProb is the share of samples above the deadline (seconds).
func MissProb(jct []float64, deadline float64) float64 {
	n := 0
	for _, x := range jct {
		if x > deadline {
			n++
		}
	}
	return float64(n) / float64(len(jct))
}

// Result is a prediction with its per-stage breakdown.
type Result struct {
	Samples  int             `json:"samples"`
	JCT      Summary         `json:"jct_s"`
	Cost     Summary         `json:"cost_usd"`
	Brackets []BracketResult `json:"brackets"`
	Outcome  Outcome         `json:"-"`
}

// BracketResult is one bracket's share of a prediction.
type BracketResult struct {
	Name   string        `json:"name"`
	JCT    Summary       `json:"jct_s"`
	Cost   Summary       `json:"cost_usd"`
	Stages []StageResult `json:"stages"`
}

// StageResult is one stage's allocation and its mean start, duration and cost. Stage costs add
// up to the bracket's cost: the meter splits each sample's bill among stages (package meter
// says how), as it splits a real run's.
type StageResult struct {
	Trials       int     `json:"trials"`
	Iters        int     `json:"iters"`
	GPUs         int     `json:"gpus"`
	GPUsPerTrial int     `json:"gpus_per_trial"`
	Nodes        int     `json:"nodes"`
	NewNodes     int     `json:"new_nodes"`
	Waves        int     `json:"waves"`
	Start        float64 `json:"start_s"`
	Duration     float64 `json:"duration_s"`
	Cost         float64 `json:"cost_usd"`
	// Interruptions is the expected number of spot interruptions that hit the stage's gangs.
	Interruptions float64 `json:"interruptions,omitempty"`
}

// Simulate predicts an allocation with its per-stage breakdown.
func (s *Simulator) Simulate(a Alloc) (Result, error) {
	if err := s.m.Check(s.brackets, a); err != nil {
		return Result{}, fmt.Errorf("simulate: %w", err)
	}
	res := Result{Samples: s.samples, Outcome: Outcome{JCT: make([]float64, s.samples), Cost: make([]float64, s.samples)}}
	var tl timeline
	for b, br := range s.brackets {
		plans := s.stagePlans(b, a[b])
		var launches [][][]meter.LaunchSpan
		if s.m.PerFunction {
			launches = s.trainLaunches(b, a[b])
		}
		n := len(plans)
		start, dur, cost, interrupted := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		bj, bc := make([]float64, s.samples), make([]float64, s.samples)
		for i := range bj {
			bj[i], bc[i] = s.sampleBracket(plans, i)
			res.Outcome.JCT[i] = max(res.Outcome.JCT[i], bj[i])
			res.Outcome.Cost[i] += bc[i]
			s.layout(b, plans, launches, i, &tl)
			bill, err := meter.Bill(s.m.Rules, tl.nodes, tl.launches, tl.windows)
			if err != nil {
				return Result{}, fmt.Errorf("simulate: bracket %d sample %d: %w", b, i, err)
			}
			for k, w := range tl.windows {
				start[k] += w.Start
				dur[k] += w.Sync - w.Start
				cost[k] += bill.Stages[meter.StageKey{Bracket: b, Stage: k}] + plans[k].spotCost(i)
				if t := plans[k].train; t.interrupted != nil {
					interrupted[k] += t.interrupted[i]
				}
			}
		}
		brs := BracketResult{Name: br.Name, JCT: Summarize(bj), Cost: Summarize(bc)}
		inv := 1 / float64(s.samples)
		for k, st := range br.Stages {
			sa := a[b][k]
			brs.Stages = append(brs.Stages, StageResult{
				Trials: st.Trials, Iters: st.Iters, GPUs: sa.GPUs, GPUsPerTrial: GPUsPerTrial(st, sa),
				Nodes: sa.Nodes, NewNodes: plans[k].newNodes, Waves: Waves(st, sa),
				Start: start[k] * inv, Duration: dur[k] * inv, Cost: cost[k] * inv, Interruptions: interrupted[k] * inv,
			})
		}
		res.Brackets = append(res.Brackets, brs)
	}
	res.JCT, res.Cost = Summarize(res.Outcome.JCT), Summarize(res.Outcome.Cost)
	return res, nil
}

// StageTrain returns the draws of stage k of bracket b at the given allocation: the time from
// the stage's start (cluster ready) to its SYNC, and the per-function cost of its TRAIN nodes.
// The slices are the simulator's own: callers must not modify them.
func (s *Simulator) StageTrain(b, k int, a StageAlloc) (dur, fnCost []float64) {
	t := s.trainPart(b, k, a)
	return t.dur, t.fnCost
}

// StageProvision returns the draws of stage k of bracket b scaling up by newNodes: the time
// until the new nodes are ready, and the SCALE latency alone (billing starts at its end). The
// slices are the simulator's own: callers must not modify them.
func (s *Simulator) StageProvision(b, k, newNodes int) (dur, scale []float64) {
	p := s.provPart(b, k, newNodes)
	return p.dur, p.scale
}

// EvaluateBracket predicts one bracket alone, per sample.
func (s *Simulator) EvaluateBracket(b int, a []StageAlloc) Outcome {
	out := Outcome{JCT: make([]float64, s.samples), Cost: make([]float64, s.samples)}
	plans := s.stagePlans(b, a)
	for i := range out.JCT {
		out.JCT[i], out.Cost[i] = s.sampleBracket(plans, i)
	}
	return out
}
