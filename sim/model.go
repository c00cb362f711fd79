package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/rubberband-hpo/rubberband/sim/meter"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Model holds everything the simulator needs to know about the cluster and the trained model.
type Model struct {
	GPUsPerNode int
	MaxNodes    int
	// NodePricePerSecond is what one node costs per second in the chosen market.
	NodePricePerSecond float64
	// Rules are the billing rules, the cost meter's: per-instance or per-function, rounding,
	// and DataCost, what a new node pays for the dataset. The executor bills a run with them.
	meter.Rules
	Scale, Init Dist
	Startup     Dist
	// DataLatency is how long a new node takes to download the dataset.
	DataLatency float64
	// SlowShare of the nodes are persistent stragglers: every trial on one takes SlowFactor
	// times as long (profile.slow_nodes).
	SlowShare, SlowFactor float64
	// Spot, when not nil, interrupts nodes (cluster.market spot with an interruption rate or
	// lifetimes): what a stage takes and costs then includes the risk.
	Spot *Spot

	points []int        // measured GPU counts, ascending
	iter   map[int]Dist // iteration latency at each measured count
}

// NewModel builds the model of a validated experiment.
func NewModel(exp *spec.Experiment) (*Model, error) {
	c := exp.Cluster
	m := &Model{
		GPUsPerNode:        c.GPUsPerNode,
		MaxNodes:           c.MaxNodes,
		NodePricePerSecond: c.HourlyPrice() / 3600,
		Rules: meter.Rules{
			PerFunction: c.Billing.Model == spec.PerFunction,
			Increment:   c.Billing.Increment.Seconds(),
			Minimum:     c.Billing.Minimum.Seconds(),
			DataCost:    c.Data.SizeGB * c.Data.PricePerGB,
		},
		iter:      map[int]Dist{},
		SlowShare: exp.Profile.SlowNodes.Share, SlowFactor: max(exp.Profile.SlowNodes.Factor, 1),
	}
	if c.Data.SizeGB > 0 {
		m.DataLatency = c.Data.SizeGB * 8 / c.NetworkGbps
	}
	var err error
	if m.Scale, err = NewDist(c.ScaleLatency); err != nil {
		return nil, fmt.Errorf("cluster.scale_latency: %w", err)
	}
	if m.Init, err = NewDist(c.InitLatency); err != nil {
		return nil, fmt.Errorf("cluster.init_latency: %w", err)
	}
	if m.Startup, err = NewDist(exp.Profile.StartupLatency); err != nil {
		return nil, fmt.Errorf("profile.startup_latency: %w", err)
	}
	if sp := c.Spot; c.Market == spec.MarketSpot && (sp.InterruptionsPerHour > 0 || sp.Lifetimes != nil) {
		m.Spot = &Spot{Rate: sp.InterruptionsPerHour / 3600, Restart: sp.OnNotice == spec.OnNoticeRestart}
		if sp.Lifetimes != nil {
			if m.Spot.Lifetimes, err = NewDist(*sp.Lifetimes); err != nil {
				return nil, fmt.Errorf("cluster.spot.lifetimes: %w", err)
			}
			m.Spot.Rate = 0
		}
	}
	for g, d := range exp.Profile.IterLatency {
		if m.iter[g], err = NewDist(d); err != nil {
			return nil, fmt.Errorf("profile.iter_latency.%d: %w", g, err)
		}
		m.points = append(m.points, g)
	}
	sort.Ints(m.points)
	if len(m.points) == 0 || m.points[0] != 1 {
		return nil, fmt.Errorf("profile.iter_latency: needs a measurement at 1 GPU")
	}
	return m, nil
}

// MaxGPUsPerTrial is the largest measured GPU count: the model does not extrapolate beyond it.
func (m *Model) MaxGPUsPerTrial() int { return m.points[len(m.points)-1] }

// IterLatency is the latency of one iteration of one trial on g GPUs. Between measured counts
// the mean is interpolated log-log and the distribution is the lower neighbour's, scaled.
func (m *Model) IterLatency(g int) Dist {
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
func (m *Model) ValidTrialGPUs(g int) bool {
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
func (m *Model) GPUPricePerSecond() float64 {
	return m.NodePricePerSecond / float64(m.GPUsPerNode)
}

// NodesFor is how many nodes hold g GPUs.
func (m *Model) NodesFor(g int) int { return (g + m.GPUsPerNode - 1) / m.GPUsPerNode }
