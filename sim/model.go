package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/rubberband-hpo/rubberband/sim/meter"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Model holds everything the simulator needs to know about the cluster and the trained model:
// the offers a plan may rent nodes from (instance types in markets) and what is common to them.
// It embeds its default offer, the cluster's own type and market (Offers[0]), which is the only
// one for a spec with one type and one market; a stage whose StageAlloc names no type or market
// runs on it.
type Model struct {
	*Offer
	MaxNodes int
	// Rules are the billing rules, the cost meter's: per-instance or per-function, rounding,
	// and DataCost, what a new node pays for the dataset. The executor bills a run with them.
	meter.Rules
	// Offers are every (type, market) a plan may rent, the default first.
	Offers []*Offer
	// Uncertainty is the relative standard deviation of the model's own error: each sample of a
	// stage takes a factor drawn from N(1, Uncertainty) (at least 0.5) times as long. A profile
	// has none; a re-plan gives its posterior some, so that the plan it picks has room for what
	// the evidence has not pinned down.
	Uncertainty float64
	// Hedge says the spec lets planners hedge spot stages (cluster.hedge): split their nodes
	// between the markets (StageAlloc.OnDemand). A hedged allocation is simulated either way.
	Hedge bool

	index map[offerKey]int
}

// Offer is one instance type in one market: its nodes' size, price, latencies, the model's
// scaling profile on it, its stragglers and, in the spot market, its interruptions.
type Offer struct {
	// Type and Market name the offer ("" type: the cluster's own, when the spec names none).
	Type, Market string
	GPUsPerNode  int
	// NodePricePerSecond is what one node costs per second in the offer's market.
	NodePricePerSecond float64
	Scale, Init        Dist
	Startup            Dist
	// Overhead is what each launch costs the run path beyond Startup and its iterations
	// (profile.launch_overhead); FirstLag how late a job's first stage gets going, once
	// (profile.first_stage_lag). Both are Constant(0) unless the profile says otherwise.
	Overhead, FirstLag Dist
	// Contention is how much later each launch of several at once starts than the one before
	// it (profile.startup_contention, by the launches' GPUs: At): a stage's first wave, launched
	// together, pays 0, c, 2c, ... in launch order.
	Contention spec.Contention
	// DataLatency is how long a new node takes to download the dataset.
	DataLatency float64
	// SlowShare of the nodes are persistent stragglers: every trial on one takes SlowFactor
	// times as long (profile.slow_nodes).
	SlowShare, SlowFactor float64
	// Spot, when not nil, interrupts nodes (the spot market with an interruption rate or
	// lifetimes): what a stage takes and costs then includes the risk.
	Spot *Spot
	// restart is cluster.spot.on_notice restart, kept for a spot offer whose spec names no
	// interruptions (Spot nil) until a run sees some (Posterior).
	restart bool
	notice  float64 // cluster.spot.notice (seconds), kept alike

	points []int        // measured GPU counts, ascending
	iter   map[int]Dist // iteration latency at each measured count
}

type offerKey struct{ typ, market string }

// NewModel builds the model of a validated experiment: one offer per candidate type and market
// (spec.Experiment.Offers).
func NewModel(exp *spec.Experiment) (*Model, error) {
	c := exp.Cluster
	m := &Model{
		MaxNodes: c.MaxNodes,
		Rules: meter.Rules{
			PerFunction: c.Billing.Model == spec.PerFunction,
			Increment:   c.Billing.Increment.Seconds(),
			Minimum:     c.Billing.Minimum.Seconds(),
			DataCost:    c.Data.SizeGB * c.Data.PricePerGB,
		},
		index: map[offerKey]int{},
		Hedge: c.Hedges(),
	}
	for i, so := range exp.Offers() {
		o, err := newOffer(c, so)
		if err != nil {
			if len(c.InstanceTypes) > 0 {
				return nil, fmt.Errorf("instance type %s: %w", so.Type.InstanceType, err)
			}
			return nil, err
		}
		m.Offers = append(m.Offers, o)
		m.index[offerKey{o.Type, o.Market}] = i
	}
	m.Offer = m.Offers[0]
	return m, nil
}

// newOffer builds one offer.
func newOffer(c spec.Cluster, so spec.Offer) (*Offer, error) {
	it, prof := so.Type, so.Type.Profile
	o := &Offer{
		Type: it.InstanceType, Market: so.Market,
		GPUsPerNode:        it.GPUsPerNode,
		NodePricePerSecond: it.HourlyPrice(so.Market) / 3600,
		iter:               map[int]Dist{},
		SlowShare:          prof.SlowNodes.Share, SlowFactor: max(prof.SlowNodes.Factor, 1),
	}
	if c.Data.SizeGB > 0 {
		o.DataLatency = c.Data.SizeGB * 8 / it.NetworkGbps
	}
	var err error
	if o.Scale, err = NewDist(it.ScaleLatency); err != nil {
		return nil, fmt.Errorf("cluster.scale_latency: %w", err)
	}
	if o.Init, err = NewDist(it.InitLatency); err != nil {
		return nil, fmt.Errorf("cluster.init_latency: %w", err)
	}
	if o.Startup, err = NewDist(prof.StartupLatency); err != nil {
		return nil, fmt.Errorf("profile.startup_latency: %w", err)
	}
	if o.Overhead, err = NewDist(prof.LaunchOverhead); err != nil {
		return nil, fmt.Errorf("profile.launch_overhead: %w", err)
	}
	if o.FirstLag, err = NewDist(prof.FirstStageLag); err != nil {
		return nil, fmt.Errorf("profile.first_stage_lag: %w", err)
	}
	o.Contention = prof.StartupContention
	o.restart = so.Market == spec.MarketSpot && c.Spot.OnNotice == spec.OnNoticeRestart
	o.notice = c.Spot.Notice.D().Seconds()
	if sp := c.Spot; so.Market == spec.MarketSpot && (sp.InterruptionsPerHour > 0 || sp.Lifetimes != nil) {
		o.Spot = &Spot{Rate: sp.InterruptionsPerHour / 3600, Restart: sp.OnNotice == spec.OnNoticeRestart, Notice: sp.Notice.D().Seconds()}
		if sp.Lifetimes != nil {
			if o.Spot.Lifetimes, err = NewDist(*sp.Lifetimes); err != nil {
				return nil, fmt.Errorf("cluster.spot.lifetimes: %w", err)
			}
			o.Spot.Rate = 0
		}
	}
	for g, d := range prof.IterLatency {
		if o.iter[g], err = NewDist(d); err != nil {
			return nil, fmt.Errorf("profile.iter_latency.%d: %w", g, err)
		}
		o.points = append(o.points, g)
	}
	sort.Ints(o.points)
	if len(o.points) == 0 || o.points[0] != 1 {
		return nil, fmt.Errorf("profile.iter_latency: needs a measurement at 1 GPU")
	}
	return o, nil
}

// OfferIndex finds the offer a stage runs on: its type and market, each empty for the default's.
func (m *Model) OfferIndex(a StageAlloc) (int, bool) {
	if a.Type == "" && a.Market == "" {
		return 0, true
	}
	typ, market := a.Type, a.Market
	if typ == "" {
		typ = m.Offers[0].Type
	}
	if market == "" {
		market = m.Offers[0].Market
	}
	i, ok := m.index[offerKey{typ, market}]
	return i, ok
}

// siblings lists offer i and every other offer of its instance type (its other markets), i first.
func (m *Model) siblings(i int) []int {
	out := []int{i}
	for j, o := range m.Offers {
		if j != i && o.Type == m.Offers[i].Type {
			out = append(out, j)
		}
	}
	return out
}

// offerOf is the offer of a stage that passed Check.
func (m *Model) offerOf(a StageAlloc) (*Offer, int) {
	i, _ := m.OfferIndex(a)
	return m.Offers[i], i
}

// On returns a with the type and market of offer i: empty for the default offer, so that a plan
// of one type and market reads as it always did.
func (m *Model) On(a StageAlloc, i int) StageAlloc {
	a.Type, a.Market = "", ""
	if i != 0 {
		a.Type, a.Market = m.Offers[i].Type, m.Offers[i].Market
	}
	return a
}

// Launch is the mean and variance of what one launch takes besides its iterations: its start-up
// and the run path's overhead.
func (m *Offer) Launch() (mean, variance float64) {
	return m.Startup.Mean() + m.Overhead.Mean(), m.Startup.Var() + m.Overhead.Var()
}

// LaunchSample draws what one launch takes besides its iterations: a start-up and an overhead
// (a Constant overhead draws nothing, so a profile without one keeps its streams).
func (m *Offer) LaunchSample(r *rand.Rand) float64 {
	return m.Startup.Sample(r) + m.Overhead.Sample(r)
}

// lags says whether stage k of bracket br waits for the first-stage lag: it is the first stage
// (its trials start from scratch) of a bracket that starts with the job, and the lag is not 0.
func (m *Offer) lags(br spec.Bracket, k int) bool {
	return br.Round == 0 && br.Stages[k].StartIter == 0 && m.FirstLag.Mean() > 0
}

// MaxGPUsPerTrial is the largest measured GPU count: the model does not extrapolate beyond it.
func (m *Offer) MaxGPUsPerTrial() int { return m.points[len(m.points)-1] }

// IterLatency is the latency of one iteration of one trial on g GPUs. Between measured counts
// the mean is interpolated log-log and the distribution is the lower neighbour's, scaled.
func (m *Offer) IterLatency(g int) Dist {
	if d, ok := m.iter[g]; ok {
		return d
	}
	i := sort.SearchInts(m.points, g) // points[i-1] < g < points[i]
	if i >= len(m.points) {
		i = len(m.points) - 1 // beyond the profile: callers keep g in range, this only guards
	}
	lo, hi := m.points[max(i-1, 0)], m.points[i]
	dlo, dhi := m.iter[lo], m.iter[hi]
	if dlo.Mean() <= 0 || dhi.Mean() <= 0 || lo == hi {
		return dlo
	}
	w := (math.Log(float64(g)) - math.Log(float64(lo))) / (math.Log(float64(hi)) - math.Log(float64(lo)))
	mean := math.Exp((1-w)*math.Log(dlo.Mean()) + w*math.Log(dhi.Mean()))
	return Scaled{Base: dlo, Factor: mean / dlo.Mean()}
}

// ValidTrialGPUs reports whether a trial can be given g GPUs: a power of two that fits in one
// node, or whole nodes, and no more than the profile measured.
func (m *Offer) ValidTrialGPUs(g int) bool {
	if g < 1 || g > m.MaxGPUsPerTrial() {
		return false
	}
	if g%m.GPUsPerNode == 0 {
		return true
	}
	return g < m.GPUsPerNode && g&(g-1) == 0
}

// Bill is what a span of t seconds costs at a price per second, after rounding up to the
// increment and applying the minimum charge: the meter's rule.
func (m *Model) Bill(t, pricePerSecond float64) float64 { return m.Charge(t, pricePerSecond) }

// GPUPricePerSecond is the per-function price of one GPU.
func (m *Offer) GPUPricePerSecond() float64 {
	return m.NodePricePerSecond / float64(m.GPUsPerNode)
}

// NodesFor is how many nodes hold g GPUs.
func (m *Offer) NodesFor(g int) int { return (g + m.GPUsPerNode - 1) / m.GPUsPerNode }

// Burst counts the launches that begin at one moment, so that each queues behind those before
// it (Offer.Contention): the simulator's ASHA and the virtual world place their launches with
// it, as the DAG's first waves are placed (Node.Queue). The zero Burst has seen no launch.
type Burst[T comparable] struct {
	at T
	n  int
}

// Place says how many launches began at now before this one, and counts it.
func (b *Burst[T]) Place(now T) int {
	if b.n == 0 || b.at != now {
		b.at, b.n = now, 0
	}
	b.n++
	return b.n - 1
}
