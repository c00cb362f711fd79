package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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
	// lostScalingUp holds, per scale-up of a spot stage beside the nodes up already, whether a
	// node is lost before the stage starts, sample by sample (scaleUpLost).
	lostScalingUp map[scaleUpKey][]bool
	groups        []group
	// held is what nodes each bracket already holds when it starts (Hold): a re-plan's present
	// state.
	held []Held
	// trialByTrial turns off drawing stages by their slowest chain and scale-ups by their
	// slowest node (DrawTrialByTrial).
	trialByTrial bool
	// chainLogs holds, per stage, the logs of the uniform draws its slowest chains are drawn at,
	// two a sample: every allocation of the stage shares them (common random numbers), and the
	// logarithm is taken once.
	chainLogs map[[2]int][]float64
	// lags holds, per first stage, its FIRST_STAGE_LAG draws when drawn by chains.
	lags map[[2]int][]float64
}

// DrawTrialByTrial makes the simulator draw every stage trial by trial and every scale-up node
// by node, as the DAG has it, instead of by order statistics where those hold (waves.go): the
// reference that the faster draws are tested against. Call it before any prediction.
func (s *Simulator) DrawTrialByTrial() { s.trialByTrial = true }

// stageKey names a stage's draws: bracket, stage, a count (GPUs or new nodes), the offer and,
// for a hedged stage, its on-demand nodes and its nodes (its standby room is their difference
// from what the GPUs need).
type stageKey struct{ b, k, x, o, od, nodes int }

// scaleUpKey names a spot stage's scale-up: by newNodes (spotNew of them on spot), beside held
// spot nodes up already.
type scaleUpKey struct{ b, k, newNodes, spotNew, held, o int }

// trainSamples are the draws of a stage's TRAIN nodes and SYNC at one GPU allocation.
type trainSamples struct {
	dur    []float64 // critical path from the stage's start (cluster ready) to its SYNC
	fnCost []float64 // per-function compute cost of the stage's TRAIN nodes
	// spotCost is what spot interruptions add to the stage's cost beyond its longer duration
	// (each replacement's dataset, less its unbilled SCALE); interrupted counts them. Nil
	// without a spot model.
	spotCost    []float64
	interrupted []float64
	// lost is what interruptions cost in all: the hold of the stage's nodes (per-instance) or
	// the TRAIN GPU-seconds (per-function) they add, priced, plus spotCost.
	lost []float64
	// atStart is the same samples had the stage found one of its nodes lost at its start (node
	// i mod nodes in sample i): lost while provisioning, or idle before (dur, spotCost,
	// interrupted and lost are set). Several found lost at once are taken as one: their
	// replacements start together. Nil without a spot model.
	atStart *trainSamples
	// idle has, sample by sample, a bit for each node lost while idle at the stage's SYNC (its
	// gangs of the stage had ended): the next stage finds it lost at its start if it keeps it.
	idle []uint64
	// least is what StageTrain returns with atStart: the lesser version, sample by sample (made
	// on first use).
	least *trainSamples
}

// provSamples are the draws of a stage's scale-up by some number of new nodes.
type provSamples struct {
	dur   []float64 // SCALE, then the slowest INIT_INSTANCE+DATA
	scale []float64 // SCALE alone: new nodes are billed from its end
}

// group is a set of nodes started together and still held, with the seconds billed so far and
// their price per second.
type group struct {
	count  int
	billed float64
	price  float64
	offer  int
	paid   float64 // what each node was billed before the prediction (held nodes: their minimum)
}

// New returns a simulator that draws samples per stage with the given seed.
func New(m *Model, brackets []spec.Bracket, samples int, seed int64) *Simulator {
	return &Simulator{m: m, brackets: brackets, samples: max(samples, 1), seed: seed,
		train: map[stageKey]*trainSamples{}, prov: map[stageKey]*provSamples{}}
}

// For is the simulator of an experiment as it stands: its model, its brackets, its planner's
// samples and its seed (what a plan of it is predicted with).
func For(exp *spec.Experiment) (*Simulator, error) {
	m, err := NewModel(exp)
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	return New(m, exp.Algorithm.Brackets(), exp.Planner.Samples, exp.Seed), nil
}

// Held is what one bracket holds when a prediction starts: Nodes up already, of an instance type
// in a market (each empty for the cluster's own, as in StageAlloc).
type Held struct {
	Nodes  int
	Type   string
	Market string
	// OnDemand is how many of Nodes are on-demand nodes of Type beside the rest in Market
	// (spot): what a hedged stage (StageAlloc.OnDemand) leaves held.
	OnDemand int
}

// pools is what the held nodes are, by offer, as a stage holding them would have them; none
// when they are no nodes.
func (h Held) pools(m *Model) []pool {
	if h.Nodes <= 0 {
		return nil
	}
	var out []pool
	for _, p := range m.pools(StageAlloc{Type: h.Type, Market: h.Market, Nodes: h.Nodes, OnDemand: h.OnDemand}) {
		if p.nodes > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Hold makes each bracket b start holding held[b] nodes of the cluster's own type and market
// that are up already; HoldNodes says of which type and market.
func (s *Simulator) Hold(held []int) {
	typed := make([]Held, len(held))
	for b, n := range held {
		typed[b] = Held{Nodes: n}
	}
	s.held = typed
}

// HoldNodes makes each bracket b start holding the nodes held[b] says, up already: a re-plan
// predicts the rest of a run from the nodes it holds. They cost from the start on (what they
// cost before is the run's, not the prediction's) and no stage of their type and market waits
// for them to start; a first stage of another type or market releases them at its start. It
// reports held nodes of a type or market the model does not offer. HoldNodes changes what every
// later prediction means; the per-stage draws stay valid.
func (s *Simulator) HoldNodes(held []Held) error {
	for b, h := range held {
		i, ok := s.m.OfferIndex(StageAlloc{Type: h.Type, Market: h.Market})
		if !ok {
			return fmt.Errorf("hold: bracket %d holds %s nodes in market %q, which the spec does not offer", b, h.Type, h.Market)
		}
		if h.OnDemand == 0 {
			continue
		}
		if _, ok := s.m.OnDemandOf(i); !ok || h.OnDemand < 0 || h.OnDemand > h.Nodes || s.m.Offers[i].Market != spec.MarketSpot {
			return fmt.Errorf("hold: bracket %d holds %d of its %d %s nodes on demand beside market %q, which the spec does not offer", b, h.OnDemand, h.Nodes, h.Type, h.Market)
		}
	}
	s.held = append([]Held(nil), held...)
	return nil
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
	streamUncertain
	streamChains
	streamLag
	streamSpotStart   // the replacements of a node a spot stage finds lost at its start
	streamScaleUpSpot // the nodes lost while a spot stage scales up
)

func (s *Simulator) stream(kind, b, k, x int) uint64 {
	z := uint64(kind)<<56 ^ uint64(b)<<40 ^ uint64(k)<<24 ^ uint64(x)
	// splitmix64 finaliser: nearby keys get unrelated streams.
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (s *Simulator) trainPart(b, k int, a StageAlloc) *trainSamples {
	_, oi := s.m.offerOf(a)
	if a.OnDemand > 0 {
		if s.m.Offers[oi].Spot != nil {
			return s.hedgedPart(b, k, a, oi)
		}
		a.OnDemand = 0 // nothing interrupts the spot nodes: the stage's draws are its market's
	}
	if t, ok := s.train[stageKey{b, k, a.GPUs, oi, 0, 0}]; ok {
		return t
	}
	// Every market of the type shares the TRAIN draws: draw them once for all.
	sibs := s.m.siblings(oi)
	parts := make([]*trainSamples, len(sibs))
	for j, si := range sibs {
		t := &trainSamples{dur: make([]float64, s.samples), fnCost: make([]float64, s.samples)}
		if s.m.Offers[si].Spot != nil {
			t.spotCost, t.interrupted, t.lost = make([]float64, s.samples), make([]float64, s.samples), make([]float64, s.samples)
			t.atStart = &trainSamples{dur: make([]float64, s.samples), fnCost: make([]float64, s.samples), spotCost: make([]float64, s.samples),
				interrupted: make([]float64, s.samples), lost: make([]float64, s.samples), idle: make([]uint64, s.samples)}
			t.idle = make([]uint64, s.samples)
		}
		parts[j] = t
		s.train[stageKey{b, k, a.GPUs, si, 0, 0}] = t
	}
	if s.trainByChains(b, k, a, sibs, parts) {
		return s.train[stageKey{b, k, a.GPUs, oi, 0, 0}]
	}
	s.drawTrain(b, k, a, sibs, func(j, i int, g *DAG, end float64, hit interruptions, start spotStart, _, latency []float64) {
		t, o := parts[j], s.m.Offers[sibs[j]]
		gpuPrice := o.GPUPricePerSecond()
		// One version of the sample: the stage's own, or the one in which it finds a node lost
		// at its start.
		put := func(t *trainSamples, end float64, hit interruptions, latency []float64) {
			t.dur[i] = end
			if t.spotCost != nil {
				t.interrupted[i] = float64(hit.count + hit.moved)
				t.spotCost[i] = float64(hit.count)*s.m.DataCost - hit.unbilled*o.NodePricePerSecond
				t.lost[i] = t.spotCost[i] + float64(a.Nodes)*(end-hit.calm)*o.NodePricePerSecond
				if s.m.PerFunction {
					t.lost[i] = t.spotCost[i] + hit.gpuSeconds*gpuPrice
				}
			}
			if s.m.PerFunction {
				for j, n := range g.Nodes {
					if n.Kind == Train {
						t.fnCost[i] += float64(n.GPUs) * s.m.Bill(latency[j], gpuPrice)
					}
				}
			}
		}
		put(t, end, hit, latency)
		if t.atStart != nil {
			t.idle[i] = hit.idle
			put(t.atStart, start.end, start.hit, start.latency)
			t.atStart.idle[i] = start.hit.idle
		}
	})
	return s.train[stageKey{b, k, a.GPUs, oi, 0, 0}]
}

// hedgedPart is trainPart for a hedged stage on spot offer oi (a.OnDemand > 0, interruptions
// on): its own draws, on the same streams as the stage unhedged (the same TRAIN latencies, the
// same interruptions of its spot nodes), priced at its two markets.
func (s *Simulator) hedgedPart(b, k int, a StageAlloc, oi int) *trainSamples {
	key := stageKey{b, k, a.GPUs, oi, a.OnDemand, a.Nodes}
	if t, ok := s.train[key]; ok {
		return t
	}
	n := s.samples
	t := &trainSamples{dur: make([]float64, n), fnCost: make([]float64, n), spotCost: make([]float64, n),
		interrupted: make([]float64, n), lost: make([]float64, n), idle: make([]uint64, n)}
	t.atStart = &trainSamples{dur: make([]float64, n), fnCost: make([]float64, n), spotCost: make([]float64, n),
		interrupted: make([]float64, n), lost: make([]float64, n), idle: make([]uint64, n)}
	spotPrice, hold := s.m.Offers[oi].NodePricePerSecond, s.m.HoldPrice(a)
	s.drawTrain(b, k, a, []int{oi}, func(_, i int, _ *DAG, end float64, hit interruptions, start spotStart, _, _ []float64) {
		put := func(t *trainSamples, end float64, hit interruptions) {
			t.dur[i] = end
			t.interrupted[i] = float64(hit.count + hit.moved)
			t.spotCost[i] = float64(hit.count)*s.m.DataCost - hit.unbilled*spotPrice
			t.lost[i] = t.spotCost[i] + hold*(end-hit.calm)
			t.idle[i] = hit.idle
		}
		put(t, end, hit)
		put(t.atStart, start.end, start.hit)
	})
	s.train[key] = t
	return t
}

// trainByChains draws a stage's samples by its slowest chain (stageByChains) into parts, one
// per market of its type, when nothing else shapes them: no spot interruptions or slow nodes on
// any of the markets, no per-function billing (which needs every TRAIN node), and chains long
// enough. It says whether it did. The model's own error is drawn as drawTrain draws it.
func (s *Simulator) trainByChains(b, k int, a StageAlloc, sibs []int, parts []*trainSamples) bool {
	if s.m.PerFunction || s.trialByTrial {
		return false
	}
	for _, si := range sibs {
		if o := s.m.Offers[si]; o.Spot != nil || o.slows() {
			return false
		}
	}
	st := s.brackets[b].Stages[k]
	draw, ok := stageByChains(s.m.Offers[sibs[0]], st, a)
	if !ok {
		return false
	}
	logs := s.chainLogs[[2]int{b, k}]
	if logs == nil {
		r := spec.NewRand(s.seed, s.stream(streamChains, b, k, 0))
		logs = make([]float64, 2*s.samples)
		for i := range logs {
			logs[i] = logUniform(r)
		}
		if s.chainLogs == nil {
			s.chainLogs = map[[2]int][]float64{}
		}
		s.chainLogs[[2]int{b, k}] = logs
	}
	lag := s.firstStageLag(b, k, s.m.Offers[sibs[0]])
	modelError := s.modelError(b, k, a)
	for i := range s.samples {
		end := draw(logs[2*i], logs[2*i+1])
		if lag != nil {
			end += lag[i]
		}
		end *= modelError()
		for _, t := range parts {
			t.dur[i] = end
		}
	}
	return true
}

// firstStageLag is, sample by sample, how late stage k of bracket b gets going on offer o when it
// is a job's first stage (FIRST_STAGE_LAG, as the DAG has it), nil when it does not wait: drawn
// once per stage from a stream of its own, every allocation sharing the draws (common random
// numbers, as the chains' uniforms).
func (s *Simulator) firstStageLag(b, k int, o *Offer) []float64 {
	if !o.lags(s.brackets[b], k) {
		return nil
	}
	key := [2]int{b, k}
	if lag, ok := s.lags[key]; ok {
		return lag
	}
	r := spec.NewRand(s.seed, s.stream(streamLag, b, k, 0))
	lag := make([]float64, s.samples)
	for i := range lag {
		lag[i] = o.FirstLag.Sample(r)
	}
	if s.lags == nil {
		s.lags = map[[2]int][]float64{}
	}
	s.lags[key] = lag
	return lag
}

// modelError draws, sample after sample, the factor of the model's own error on a stage at an
// allocation (1 without planner uncertainty): one per sample, whatever the offer, from a stream
// of its own, so that drawing a stage by chains or trial by trial draws the same factors.
func (s *Simulator) modelError(b, k int, a StageAlloc) func() float64 {
	if s.m.Uncertainty <= 0 {
		return func() float64 { return 1 }
	}
	r := spec.NewRand(s.seed, s.stream(streamUncertain, b, k, a.GPUs))
	return func() float64 { return max(0.5, 1+s.m.Uncertainty*r.NormFloat64()) }
}

// spotStart is a sample of a spot stage had it found a node lost at its start: its end, what
// the interruptions did, and every node's finish and latency.
type spotStart struct {
	end             float64
	hit             interruptions
	finish, latency []float64
}

// drawTrain draws a stage's TRAIN nodes and SYNC sample by sample from the stage's own stream,
// and, on each of the given offers (markets of one type: they share the profile), the slow nodes
// and spot interruptions that hit them (from streams of their own, so that the same stage draws
// the same TRAIN latencies with and without them); it hands each offer's (by its index j in
// offers) sample's DAG, end, interruptions, the same had a node been found lost at the stage's
// start (spot only), and every node's latency to each. The same stage and allocation always
// give the same draws; the streams do not depend on the offer, so that plans on different types
// and markets compare on common random numbers.
func (s *Simulator) drawTrain(b, k int, a StageAlloc, offers []int, each func(j, i int, g *DAG, end float64, hit interruptions, start spotStart, finish, latency []float64)) {
	g := &DAG{}
	st := s.brackets[b].Stages[k]
	g.addTrain(offers[0], b, k, st, a, nil, s.m.Offers[offers[0]].lags(s.brackets[b], k))
	r := spec.NewRand(s.seed, s.stream(streamTrain, b, k, a.GPUs))
	modelError := s.modelError(b, k, a)
	gpt := GPUsPerTrial(st, a)
	type perOffer struct {
		o                 *Offer
		rs, rslow, rstart *rand.Rand
		layout            *spotLayout
	}
	per := make([]perOffer, len(offers))
	for j, oi := range offers {
		o := s.m.Offers[oi]
		per[j].o = o
		if o.Spot != nil {
			per[j].rs = spec.NewRand(s.seed, s.stream(streamSpot, b, k, a.GPUs))
			per[j].rstart = spec.NewRand(s.seed, s.stream(streamSpotStart, b, k, a.GPUs))
			per[j].layout = o.newSpotLayout(g, a.Nodes, gpt, a.OnDemand)
		}
		if o.slows() {
			per[j].rslow = spec.NewRand(s.seed, s.stream(streamSlow, b, k, a.GPUs))
		}
	}
	calmFinish, calmLatency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	finish, latency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	var start spotStart // the spot version in which a node is found lost at the start
	if slices.ContainsFunc(per, func(po perOffer) bool { return po.rs != nil }) {
		start.finish, start.latency = make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	}
	for i := range s.samples {
		calm := g.CriticalPath(s.m, r, calmFinish, calmLatency)
		err := modelError()
		for j, po := range per {
			end := calm
			f, l := calmFinish, calmLatency
			if po.rslow != nil || po.rs != nil { // they change the draws in place: on a copy
				f, l = finish, latency
				copy(f, calmFinish)
				copy(l, calmLatency)
			}
			if po.rslow != nil {
				end = po.o.slowDown(g, a.Nodes, gpt, po.rslow, f, l)
			}
			var hit interruptions
			if po.rs != nil {
				copy(start.finish, f)
				copy(start.latency, l)
				po.o.firstInterruptions(po.layout, po.rs)
				// A spot node is the one found lost (every node, unhedged).
				start.end, start.hit = po.o.interrupt(po.layout, g, po.rstart, end, start.finish, start.latency, a.OnDemand+i%a.Spot())
				start.end *= err
				end, hit = po.o.interrupt(po.layout, g, po.rs, end, f, l, -1)
			}
			each(j, i, g, end*err, hit, start, f, l)
		}
	}
}

// stageLaunches are a stage's TRAIN draws as launch spans, per sample: the stage's own, and on
// spot those in which it finds a node lost at its start (trainSamples.atStart).
type stageLaunches struct{ own, atStart [][]meter.LaunchSpan }

// trainLaunches replays each stage's TRAIN draws (trainPart's) as launch spans: per stage, per
// sample, one span per TRAIN node, timed from the stage's TRAIN start. Per-function billing
// needs them; the planners' hot path gets by with trainPart's sums.
func (s *Simulator) trainLaunches(b int, a []StageAlloc) []stageLaunches {
	out := make([]stageLaunches, len(a))
	for k, sa := range a {
		o, oi := s.m.offerOf(sa)
		price := o.GPUPricePerSecond()
		spans := func(g *DAG, finish, latency []float64) []meter.LaunchSpan {
			var out []meter.LaunchSpan
			for j, n := range g.Nodes {
				if n.Kind == Train {
					out = append(out, meter.LaunchSpan{Bracket: b, Start: finish[j] - latency[j], End: finish[j], GPUs: n.GPUs, PricePerGPUSecond: price})
				}
			}
			return out
		}
		out[k].own = make([][]meter.LaunchSpan, s.samples)
		if o.Spot != nil {
			out[k].atStart = make([][]meter.LaunchSpan, s.samples)
		}
		s.drawTrain(b, k, sa, []int{oi}, func(_, i int, g *DAG, _ float64, _ interruptions, start spotStart, finish, latency []float64) {
			out[k].own[i] = spans(g, finish, latency)
			if out[k].atStart != nil {
				out[k].atStart[i] = spans(g, start.finish, start.latency)
			}
		})
	}
	return out
}

func (s *Simulator) provPart(b, k, newNodes, offer int) *provSamples {
	key := stageKey{b, k, newNodes, offer, 0, 0}
	if p, ok := s.prov[key]; ok {
		return p
	}
	r := spec.NewRand(s.seed, s.stream(streamProvision, b, k, newNodes))
	p := &provSamples{dur: make([]float64, s.samples), scale: make([]float64, s.samples)}
	// The slowest new node at once (maxOf), when its start-up's quantiles are known: a scale-up
	// by thousands of nodes is then two draws a sample. The same draws the DAG would make, in
	// distribution: SCALE, then the slowest INIT_INSTANCE, then DATA, a constant.
	o := s.m.Offers[offer]
	if knowsMax(o.Init) && !s.trialByTrial {
		for i := range p.dur {
			p.scale[i] = o.Scale.Sample(r)
			init, _ := maxOf(o.Init, newNodes, r)
			p.dur[i] = p.scale[i] + init + o.DataLatency
		}
		s.prov[key] = p
		return p
	}
	g := &DAG{}
	g.addProvision(s.m, offer, b, k, newNodes, nil)
	finish, latency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	for i := range p.dur {
		p.dur[i] = g.CriticalPath(s.m, r, finish, latency)
		p.scale[i] = latency[0]
	}
	s.prov[key] = p
	return p
}

// scaleUpLost draws, sample by sample, whether a spot stage's scale-up by newNodes of offer
// (spotNew of them spot nodes: fewer in a hedged stage, whose on-demand ones are not lost) loses
// a node before the stage starts: a new spot node between the end of the SCALE and the end of
// the scale-up (the slowest INIT_INSTANCE and DATA: the nodes are handed over together), or one
// of the held spot nodes up already, idle while they wait. The executor finds it lost at the
// stage's start. The draws of the scale-up itself are provPart's, the same with or without spot.
func (s *Simulator) scaleUpLost(b, k, newNodes, spotNew, held, offer int) []bool {
	key := scaleUpKey{b, k, newNodes, spotNew, held, offer}
	if lost, ok := s.lostScalingUp[key]; ok {
		return lost
	}
	p := s.provPart(b, k, newNodes, offer)
	sp := s.m.Offers[offer].Spot
	r := spec.NewRand(s.seed, s.stream(streamScaleUpSpot, b, k, newNodes))
	lost := make([]bool, s.samples)
	for i := range lost {
		lost[i] = sp.lostWithin(r, spotNew, p.dur[i]-p.scale[i]) || sp.lostWithin(r, held, p.dur[i])
	}
	if s.lostScalingUp == nil {
		s.lostScalingUp = map[scaleUpKey][]bool{}
	}
	s.lostScalingUp[key] = lost
	return lost
}

// stagePlan is one stage's share of an evaluation: its draws and how many nodes it adds.
type stagePlan struct {
	alloc StageAlloc
	offer *Offer
	// held is the nodes held before the stage starts and still running, by offer (only on
	// stage 0; Held.pools).
	held []pool
	// pools are the nodes the stage holds, by offer (Model.pools): nodes held before it of
	// another offer go at the previous SYNC, and of one of them, those beyond its count.
	pools []pool
	// added are the nodes it starts, by offer (newNodes in all).
	added    []pool
	newNodes int
	train    *trainSamples
	prov     *provSamples
	// On spot, what makes the stage find a node lost at its start (train.atStart): a node the
	// stage before lost idle that this one keeps (its idle bits in kept; 0 when it keeps none),
	// or a node lost while it scales up (scaleUpLost, sample by sample; nil when none can be).
	kept        uint64
	scaleUpLost []bool
}

// version is the draws of sample i of the stage: its own, or, when it finds a node lost at its
// start, those in which it does (train.atStart). idle is the idle bits the stage before left
// in sample i (idleAt of the version it took).
func (p *stagePlan) version(i int, idle uint64) *trainSamples {
	if p.train.atStart != nil && (idle&p.kept != 0 || p.scaleUpLost != nil && p.scaleUpLost[i]) {
		return p.train.atStart
	}
	return p.train
}

// idleAt is the bits of the nodes sample i left lost idle at the stage's SYNC.
func (t *trainSamples) idleAt(i int) uint64 {
	if t.idle == nil {
		return 0
	}
	return t.idle[i]
}

// spotCostAt is what spot interruptions add to sample i of the stage beyond its longer
// duration, which the meter does not see: the replacements' datasets, less their unbilled SCALE.
func (t *trainSamples) spotCostAt(i int) float64 {
	if t.spotCost == nil {
		return 0
	}
	return t.spotCost[i]
}

func (s *Simulator) stagePlans(b int, a []StageAlloc) []stagePlan {
	plans := make([]stagePlan, len(a))
	var up []pool // the nodes up before each stage, by offer
	if b < len(s.held) && len(plans) > 0 {
		plans[0].held = s.held[b].pools(s.m)
		up = plans[0].held
	}
	upOn := func(o int) int {
		for _, p := range up {
			if p.offer == o {
				return p.nodes
			}
		}
		return 0
	}
	prevOD := 0 // the on-demand nodes of the stage before: its spot nodes' idle bits follow them
	for k, sa := range a {
		o, oi := s.m.offerOf(sa)
		p := &plans[k]
		p.alloc, p.offer, p.train, p.pools = sa, o, s.trainPart(b, k, sa), s.m.pools(sa)
		for _, q := range p.pools {
			if n := q.nodes - upOn(q.offer); n > 0 {
				p.added = append(p.added, pool{q.offer, n})
				p.newNodes += n
			}
		}
		// The stage's own market's nodes it keeps (the first of the stage before's, in order).
		kept := min(upOn(oi), p.pools[0].nodes)
		if k > 0 && kept > 0 && o.Spot != nil {
			if p.kept = keptMask(kept); prevOD >= idleBits {
				p.kept = 0
			} else {
				p.kept <<= prevOD
			}
		}
		if p.newNodes > 0 {
			p.prov = s.provPart(b, k, p.newNodes, oi)
			if o.Spot != nil {
				p.scaleUpLost = s.scaleUpLost(b, k, p.newNodes, p.pools[0].nodes-kept, kept, oi)
			}
		}
		up, prevOD = p.pools, sa.OnDemand
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
	rounds := NewRounds(s.brackets, s.samples)
	for b := range a {
		ob := s.EvaluateBracket(b, a[b])
		rounds.Add(b, ob.JCT)
		for i := range out.Cost {
			out.Cost[i] += ob.Cost[i]
		}
	}
	rounds.Total(out.JCT)
	return out
}

// Rounds composes brackets' completion times, sample by sample: brackets of one round run side
// by side (the round ends with the last of them), rounds one after another (Hyperband's rounds).
// Brackets are added in order.
type Rounds struct {
	brackets []spec.Bracket
	done     []float64 // the rounds before the current one, in all
	current  []float64 // the current round so far
	round    int
}

// NewRounds composes the brackets' times over n samples.
func NewRounds(brackets []spec.Bracket, n int) *Rounds {
	return &Rounds{brackets: brackets, done: make([]float64, n), current: make([]float64, n)}
}

// Add adds bracket b's completion times (from its own start).
func (r *Rounds) Add(b int, jct []float64) {
	round := 0
	if b < len(r.brackets) {
		round = r.brackets[b].Round
	}
	if round != r.round {
		for i := range r.done {
			r.done[i] += r.current[i]
			r.current[i] = 0
		}
		r.round = round
	}
	for i := range r.current {
		r.current[i] = max(r.current[i], jct[i])
	}
}

// Start is when the current round starts, sample i.
func (r *Rounds) Start(i int) float64 { return r.done[i] }

// Total writes the job's completion times into out.
func (r *Rounds) Total(out []float64) {
	for i := range out {
		out[i] = r.done[i] + r.current[i]
	}
}

// sampleBracket walks one bracket's stages for sample i and returns its JCT and cost. It is the
// planners' inner loop, so it keeps the total alone: nodes held are grouped by when they
// started, and each group is billed when released, newest first. Simulate's per-stage split
// lays the same sample out for the meter instead (layout); a test holds the two to one total.
func (s *Simulator) sampleBracket(plans []stagePlan, i int) (float64, float64) {
	m := s.m
	groups := s.groups[:0]
	live := 0
	if len(plans) > 0 && !m.PerFunction {
		for _, p := range plans[0].held {
			live += p.nodes
			// The run's meter has billed a node still up at least its minimum: from here on it
			// costs its time alone, not a minimum again.
			price := m.Offers[p.offer].NodePricePerSecond
			groups = append(groups, group{count: p.nodes, billed: m.Minimum, price: price, offer: p.offer, paid: m.Bill(m.Minimum, price)})
		}
	}
	t, total := 0.0, 0.0
	release := func(n int) { // release n nodes, newest first
		for n > 0 {
			g := &groups[len(groups)-1]
			rel := min(g.count, n)
			total += float64(rel) * (m.Bill(g.billed, g.price) - g.paid)
			g.count -= rel
			n -= rel
			live -= rel
			if g.count == 0 {
				groups = groups[:len(groups)-1]
			}
		}
	}
	// releaseTo releases, newest first, the nodes of each offer beyond what the stage keeps of
	// it (pools): all of another offer's. With the nodes of one offer live, that is release.
	releaseTo := func(pools []pool) {
		switch { // the common cases, cheaply: a stage on another offer, or on the same one alone
		case len(pools) == 0:
			release(live)
			return
		case len(pools) == 1 && oneOffer(groups, pools[0].offer):
			if live > pools[0].nodes {
				release(live - pools[0].nodes)
			}
			return
		}
		for j := len(groups) - 1; j >= 0 && live > 0; j-- {
			keep := 0
			for _, q := range pools {
				if q.offer == groups[j].offer {
					keep = q.nodes
				}
			}
			for i := range j { // the older groups of the offer keep theirs first
				if groups[i].offer == groups[j].offer {
					keep -= groups[i].count
				}
			}
			if rel := groups[j].count - max(keep, 0); rel > 0 {
				g := &groups[j]
				total += float64(rel) * (m.Bill(g.billed, g.price) - g.paid)
				g.count -= rel
				live -= rel
			}
		}
		groups = slices.DeleteFunc(groups, func(g group) bool { return g.count == 0 })
	}
	idle := uint64(0)
	for k := range plans {
		p := &plans[k]
		if !m.PerFunction && live > 0 {
			releaseTo(p.pools)
		}
		v := p.version(i, idle)
		idle = v.idleAt(i)
		dur, scale := v.dur[i], 0.0
		if p.prov != nil {
			dur += p.prov.dur[i]
			scale = p.prov.scale[i]
		}
		total += v.spotCostAt(i)
		if m.PerFunction {
			total += float64(p.newNodes)*m.DataCost + v.fnCost[i]
		} else {
			total += float64(p.newNodes) * m.DataCost
			for _, q := range p.added {
				groups = append(groups, group{count: q.nodes, billed: -scale, price: m.Offers[q.offer].NodePricePerSecond, offer: q.offer})
				live += q.nodes
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

// oneOffer says whether every group holds nodes of offer o.
func oneOffer(groups []group, o int) bool {
	for _, g := range groups {
		if g.offer != o {
			return false
		}
	}
	return true
}

// timeline is one sample of a bracket laid out for the meter, on a clock from the run's start.
type timeline struct {
	windows  []meter.StageWindow
	nodes    []meter.NodeSpan
	launches []meter.LaunchSpan
	held     []int           // the nodes held, oldest first, as indices into nodes
	heldAt   []int           // the offer of each node held
	versions []*trainSamples // the draws each stage took (stagePlan.version)
}

// layout lays out sample i of bracket b as sampleBracket walks it: stage k's window runs from
// the previous SYNC to its own; a new node runs from the end of its SCALE until the SYNC after
// which the plan no longer needs it (newest first) or the bracket's last SYNC; under
// per-function billing each TRAIN node is a launch, from launches (trainLaunches), shifted to
// its stage's TRAIN start.
func (s *Simulator) layout(b int, plans []stagePlan, launches []stageLaunches, i int, tl *timeline) {
	tl.windows, tl.nodes, tl.launches, tl.held, tl.heldAt, tl.versions = tl.windows[:0], tl.nodes[:0], tl.launches[:0], tl.held[:0], tl.heldAt[:0], tl.versions[:0]
	t := 0.0
	// release keeps, of each offer, the oldest nodes pools holds of it, and releases the rest.
	release := func(pools []pool) {
		kept := 0
		for x, n := range tl.held {
			o, keep := tl.heldAt[x], 0
			for _, q := range pools {
				if q.offer == o {
					keep = q.nodes
				}
			}
			for _, older := range tl.heldAt[:kept] { // the nodes of o kept so far
				if older == o {
					keep--
				}
			}
			if keep <= 0 {
				tl.nodes[n].ReleasedAt = t
				continue
			}
			tl.held[kept], tl.heldAt[kept] = n, o
			kept++
		}
		tl.held, tl.heldAt = tl.held[:kept], tl.heldAt[:kept]
	}
	if len(plans) > 0 && !s.m.PerFunction {
		for _, p := range plans[0].held {
			for range p.nodes {
				tl.held, tl.heldAt = append(tl.held, len(tl.nodes)), append(tl.heldAt, p.offer)
				tl.nodes = append(tl.nodes, meter.NodeSpan{Bracket: b, PricePerSecond: s.m.Offers[p.offer].NodePricePerSecond, Paid: s.m.Minimum})
			}
		}
	}
	idle := uint64(0)
	for k := range plans {
		p := &plans[k]
		release(p.pools)
		v := p.version(i, idle)
		idle = v.idleAt(i)
		tl.versions = append(tl.versions, v)
		dur, ready, scale := v.dur[i], 0.0, 0.0
		if p.prov != nil {
			ready, scale = p.prov.dur[i], p.prov.scale[i]
			dur += ready
		}
		for _, q := range p.added {
			for range q.nodes {
				tl.held, tl.heldAt = append(tl.held, len(tl.nodes)), append(tl.heldAt, q.offer)
				tl.nodes = append(tl.nodes, meter.NodeSpan{Bracket: b, RunningFrom: t + scale, PricePerSecond: s.m.Offers[q.offer].NodePricePerSecond})
			}
		}
		if launches != nil {
			spans := launches[k].own[i]
			if v == p.train.atStart {
				spans = launches[k].atStart[i]
			}
			for _, l := range spans {
				l.Start, l.End = t+ready+l.Start, t+ready+l.End
				tl.launches = append(tl.launches, l)
			}
		}
		tl.windows = append(tl.windows, meter.StageWindow{Bracket: b, Stage: k, Start: t, Sync: t + dur})
		t += dur
	}
	release(nil)
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
	// InterruptionCost is what they add to the stage's expected cost: the longer hold of the
	// stage's nodes (against the same draws uninterrupted) and the replacements' datasets.
	InterruptionCost float64 `json:"interruption_cost_usd,omitempty"`
	// Type and Market are the stage's instance type and market, when the spec offers several.
	Type   string `json:"type,omitempty"`
	Market string `json:"market,omitempty"`
	// OnDemandNodes are, in a hedged stage (StageAlloc.OnDemand), how many of Nodes are on
	// demand: the rest are in Market (spot).
	OnDemandNodes int `json:"on_demand_nodes,omitempty"`
}

// Simulate predicts an allocation with its per-stage breakdown.
func (s *Simulator) Simulate(a Alloc) (Result, error) {
	if err := s.m.Check(s.brackets, a); err != nil {
		return Result{}, fmt.Errorf("simulate: %w", err)
	}
	res := Result{Samples: s.samples, Outcome: Outcome{JCT: make([]float64, s.samples), Cost: make([]float64, s.samples)}}
	var tl timeline
	rounds := NewRounds(s.brackets, s.samples)
	for b, br := range s.brackets {
		plans := s.stagePlans(b, a[b])
		var launches []stageLaunches
		if s.m.PerFunction {
			launches = s.trainLaunches(b, a[b])
		}
		n := len(plans)
		start, dur, cost, interrupted, lost := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		bj, bc := make([]float64, s.samples), make([]float64, s.samples)
		for i := range bj {
			bj[i], bc[i] = s.sampleBracket(plans, i)
			res.Outcome.Cost[i] += bc[i]
		}
		rounds.Add(b, bj)
		for i := range bj {
			s.layout(b, plans, launches, i, &tl)
			bill, err := meter.Bill(s.m.Rules, tl.nodes, tl.launches, tl.windows)
			if err != nil {
				return Result{}, fmt.Errorf("simulate: bracket %d sample %d: %w", b, i, err)
			}
			for k, w := range tl.windows {
				start[k] += w.Start + rounds.Start(i)
				dur[k] += w.Sync - w.Start
				v := tl.versions[k]
				cost[k] += bill.Stages[meter.StageKey{Bracket: b, Stage: k}] + v.spotCostAt(i)
				if t := v; t.interrupted != nil {
					interrupted[k] += t.interrupted[i]
					lost[k] += t.lost[i]
				}
			}
		}
		brs := BracketResult{Name: br.Name, JCT: Summarize(bj), Cost: Summarize(bc)}
		inv := 1 / float64(s.samples)
		for k, st := range br.Stages {
			sa := a[b][k]
			sr := StageResult{
				Trials: st.Trials, Iters: st.Iters, GPUs: sa.GPUs, GPUsPerTrial: GPUsPerTrial(st, sa),
				Nodes: sa.Nodes, NewNodes: plans[k].newNodes, Waves: Waves(st, sa),
				Start: start[k] * inv, Duration: dur[k] * inv, Cost: cost[k] * inv,
				Interruptions: interrupted[k] * inv, InterruptionCost: lost[k] * inv,
				OnDemandNodes: sa.OnDemand,
			}
			if len(s.m.Offers) > 1 {
				sr.Type, sr.Market = plans[k].offer.Type, plans[k].offer.Market
			}
			brs.Stages = append(brs.Stages, sr)
		}
		res.Brackets = append(res.Brackets, brs)
	}
	rounds.Total(res.Outcome.JCT)
	res.JCT, res.Cost = Summarize(res.Outcome.JCT), Summarize(res.Outcome.Cost)
	return res, nil
}

// StageTrain returns the draws of stage k of bracket b at the given allocation: the time from
// the stage's start (cluster ready) to its SYNC, the per-function cost of its TRAIN nodes, and
// what spot interruptions add to the cost beyond the hold of the nodes for that time (nil
// without interruptions; it may be negative: a replacement's SCALE is not billed). On spot, a
// stage that finds a node lost at its start takes other draws (trainSamples.atStart), which
// depend on the stages before it: each figure is then the least of the two, sample by sample,
// so that bounds built on them hold. The slices are the simulator's own: callers must not
// modify them.
func (s *Simulator) StageTrain(b, k int, a StageAlloc) (dur, fnCost, spotCost []float64) {
	t := s.trainPart(b, k, a)
	if t.atStart == nil {
		return t.dur, t.fnCost, t.spotCost
	}
	if t.least == nil {
		o, _ := s.m.offerOf(a)
		least := &trainSamples{dur: make([]float64, len(t.dur)), fnCost: make([]float64, len(t.dur)), spotCost: make([]float64, len(t.dur))}
		for i := range t.dur {
			least.dur[i] = min(t.dur[i], t.atStart.dur[i])
			least.fnCost[i] = min(t.fnCost[i], t.atStart.fnCost[i])
			beyond := func(v *trainSamples) float64 { // its spot cost beyond the hold of least.dur
				if s.m.PerFunction {
					return v.spotCost[i]
				}
				if a.OnDemand > 0 {
					return v.spotCost[i] + s.m.HoldPrice(a)*(v.dur[i]-least.dur[i])
				}
				return v.spotCost[i] + float64(a.Nodes)*(v.dur[i]-least.dur[i])*o.NodePricePerSecond
			}
			least.spotCost[i] = min(beyond(t), beyond(t.atStart))
		}
		t.least = least
	}
	return t.least.dur, t.least.fnCost, t.least.spotCost
}

// StageInterruptions is the mean number of spot interruptions that hit stage k of bracket b at
// the given allocation (0 on a market without them): what a planner weighs hedging it by.
func (s *Simulator) StageInterruptions(b, k int, a StageAlloc) float64 {
	t := s.trainPart(b, k, a)
	if t.interrupted == nil {
		return 0
	}
	sum := 0.0
	for _, x := range t.interrupted {
		sum += x
	}
	return sum / float64(len(t.interrupted))
}

// StageProvision returns the draws of stage k of bracket b scaling up by newNodes of offer
// (an index in Model.Offers): the time until the new nodes are ready, and the SCALE latency
// alone (billing starts at its end). The slices are the simulator's own: callers must not modify
// them.
func (s *Simulator) StageProvision(b, k, newNodes, offer int) (dur, scale []float64) {
	p := s.provPart(b, k, newNodes, offer)
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
