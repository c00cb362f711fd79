package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/spec"
)

// StageAlloc is what a plan gives one stage: GPUs for its trials and the nodes held meanwhile,
// of an instance type in a market. Nodes is at least the nodes the GPUs need; a static plan holds
// more. An empty Type or Market is the cluster's own (Model.Offers[0]'s). A stage on another type
// or market than the nodes held before it releases them all at the previous SYNC and starts its
// own (SCALE, INIT_INSTANCE, DATA); its trials move through their checkpoints.
//
// A hedged stage (Proteus' reliability tiers) is a spot stage with OnDemand > 0: OnDemand of its
// Nodes are of the same type on the on-demand market, the rest on spot. The on-demand nodes are
// the stage's first ones, where the placement packs the gangs that the plan marks critical (the
// longest chains of trials: the last wave's); only the spot nodes are interrupted, and an
// interrupted gang moves to free on-demand room when there is some, instead of waiting for a
// replacement. Zero (every plan before hedging) keeps the stage in one market.
type StageAlloc struct {
	GPUs   int    `json:"gpus"`
	Nodes  int    `json:"nodes"`
	Type   string `json:"type,omitempty"`
	Market string `json:"market,omitempty"`
	// OnDemand is how many of Nodes are on-demand nodes of the stage's type, in a hedged stage
	// (Market spot); 0: none.
	OnDemand int `json:"on_demand_nodes,omitempty"`
}

// Spot is how many of the stage's nodes are in its own market (all of them but a hedged
// stage's on-demand ones).
func (a StageAlloc) Spot() int { return a.Nodes - a.OnDemand }

// FormatStages writes stages as `simulate --alloc` reads them, bracketed: each stage's GPUs,
// @TYPE:MARKET when it names a type or market, and +Nod when it is hedged with N on-demand
// nodes ("[16 8@p3.2xlarge:spot 24@:spot+2od]").
func FormatStages(stages []StageAlloc) string {
	out := make([]string, len(stages))
	for i, sa := range stages {
		out[i] = strconv.Itoa(sa.GPUs)
		if sa.Type != "" || sa.Market != "" {
			out[i] += "@" + sa.Type + ":" + sa.Market
		}
		if sa.OnDemand > 0 {
			out[i] += "+" + strconv.Itoa(sa.OnDemand) + "od"
		}
	}
	return "[" + strings.Join(out, " ") + "]"
}

// Alloc is a plan's allocation: one StageAlloc per stage of each bracket.
type Alloc [][]StageAlloc

// Elastic turns GPU counts per stage into an allocation that holds just the nodes they need, of
// the default offer.
func (m *Model) Elastic(gpus [][]int) Alloc {
	a := make(Alloc, len(gpus))
	for b, stages := range gpus {
		a[b] = make([]StageAlloc, len(stages))
		for k, g := range stages {
			a[b][k] = StageAlloc{GPUs: g, Nodes: m.NodesFor(g)}
		}
	}
	return a
}

// Clone returns a deep copy.
func (a Alloc) Clone() Alloc {
	c := make(Alloc, len(a))
	for b := range a {
		c[b] = append([]StageAlloc(nil), a[b]...)
	}
	return c
}

// PeakNodes bounds the nodes held at once: brackets run concurrently, so it adds up each
// bracket's largest stage. It is exact for one bracket and safe for several; brackets of
// Hyperband rounds run one round after another (PeakNodesByRound).
func (a Alloc) PeakNodes() int {
	return a.PeakNodesByRound(nil)
}

// PeakNodesByRound is PeakNodes where brackets of different rounds never overlap: the largest,
// over rounds, of the sum of their brackets' peaks. brackets nil: one round.
func (a Alloc) PeakNodesByRound(brackets []spec.Bracket) int {
	perRound := map[int]int{}
	peakAll := 0
	for b := range a {
		round := 0
		if b < len(brackets) {
			round = brackets[b].Round
		}
		perRound[round] += a.PeakNodesOf(b)
		peakAll = max(peakAll, perRound[round])
	}
	return peakAll
}

// GPUsPerTrial is what each trial of a stage gets: its share when there are enough GPUs, else 1
// (trials then queue in waves on single-GPU slots).
func GPUsPerTrial(s spec.Stage, a StageAlloc) int {
	if a.GPUs >= s.Trials {
		return a.GPUs / s.Trials
	}
	return 1
}

// Waves is how many rounds of trials a stage runs.
func Waves(s spec.Stage, a StageAlloc) int {
	if a.GPUs >= s.Trials {
		return 1
	}
	return (s.Trials + a.GPUs - 1) / a.GPUs
}

// Check reports the first way an allocation does not fit the brackets and the model.
func (m *Model) Check(brackets []spec.Bracket, a Alloc) error {
	if len(a) != len(brackets) {
		return fmt.Errorf("allocation has %d brackets, the experiment %d", len(a), len(brackets))
	}
	for b, br := range brackets {
		if len(a[b]) != len(br.Stages) {
			return fmt.Errorf("bracket %d: allocation has %d stages, the experiment %d", b+1, len(a[b]), len(br.Stages))
		}
		for k, s := range br.Stages {
			sa := a[b][k]
			where := fmt.Sprintf("bracket %d stage %d (%d trials)", b+1, k+1, s.Trials) // numbered from 1, as people count
			i, ok := m.OfferIndex(sa)
			if !ok {
				return fmt.Errorf("%s: instance type %q in market %q is not one the spec offers", where, sa.Type, sa.Market)
			}
			if err := m.checkHedge(sa, i); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			m := m.Offers[i]
			if sa.GPUs < 1 {
				return fmt.Errorf("%s: %d GPUs (need at least 1)", where, sa.GPUs)
			}
			if sa.Nodes < m.NodesFor(sa.GPUs) {
				return fmt.Errorf("%s: %d GPUs do not fit on %s of %s", where, sa.GPUs, format.Plural(sa.Nodes, "node"), format.Plural(m.GPUsPerNode, "GPU"))
			}
			if sa.GPUs > s.Trials {
				if sa.GPUs%s.Trials != 0 {
					return fmt.Errorf("%s: %d GPUs do not divide evenly among the trials", where, sa.GPUs)
				}
				if g := sa.GPUs / s.Trials; !m.ValidTrialGPUs(g) {
					return fmt.Errorf("%s: %d GPUs per trial is not placeable (powers of two up to %d, or whole nodes, at most %d as profiled)",
						where, g, m.GPUsPerNode, m.MaxGPUsPerTrial())
				}
			}
		}
	}
	if p := a.PeakNodesByRound(brackets); p > m.MaxNodes { // nodes of every type count
		return fmt.Errorf("allocation holds up to %d nodes, above max_nodes %d", p, m.MaxNodes)
	}
	return nil
}

// checkHedge reports what is wrong with a stage's on-demand nodes (StageAlloc.OnDemand) on
// offer i: a hedged stage is a spot stage whose type the spec also offers on demand, holds at
// least one spot node, and bills nodes (per-function billing has none to hedge).
func (m *Model) checkHedge(sa StageAlloc, i int) error {
	switch {
	case sa.OnDemand == 0:
		return nil
	case sa.OnDemand < 0:
		return fmt.Errorf("%d on-demand nodes (need 0 or more)", sa.OnDemand)
	case m.Offers[i].Market != spec.MarketSpot:
		return fmt.Errorf("%d on-demand nodes in a stage on market %s (only a spot stage holds on-demand nodes beside its own)", sa.OnDemand, m.Offers[i].Market)
	case m.PerFunction:
		return fmt.Errorf("%d on-demand nodes under per-function billing (it bills no nodes to hedge)", sa.OnDemand)
	case sa.OnDemand >= sa.Nodes:
		return fmt.Errorf("%d on-demand nodes of %s (a hedged stage keeps at least one spot node; all on demand is market on-demand)", sa.OnDemand, format.Plural(sa.Nodes, "node"))
	}
	if _, ok := m.OnDemandOf(i); !ok {
		return fmt.Errorf("%d on-demand nodes of %s, which the spec does not offer on demand (cluster.markets)", sa.OnDemand, m.Offers[i].Type)
	}
	return nil
}

// OnDemandOf is the on-demand offer of offer i's type (an index in Offers): where a hedged
// stage on offer i holds its on-demand nodes.
func (m *Model) OnDemandOf(i int) (int, bool) {
	j, ok := m.index[offerKey{m.Offers[i].Type, spec.MarketOnDemand}]
	return j, ok
}

// pool is the nodes a stage holds of one offer.
type pool struct{ offer, nodes int }

// pools lists the nodes a stage that passed Check holds, by offer: its own offer's, then, in a
// hedged stage, the on-demand ones.
func (m *Model) pools(a StageAlloc) []pool {
	_, oi := m.offerOf(a)
	if a.OnDemand == 0 {
		return []pool{{oi, a.Nodes}}
	}
	od, _ := m.OnDemandOf(oi)
	return []pool{{oi, a.Nodes - a.OnDemand}, {od, a.OnDemand}}
}

// HoldPrice is what the nodes of a stage that passed Check cost per second, all
// together: its own offer's price for each, but the on-demand price for a hedged stage's
// on-demand nodes.
func (m *Model) HoldPrice(a StageAlloc) float64 {
	price := 0.0
	for _, p := range m.pools(a) {
		price += float64(p.nodes) * m.Offers[p.offer].NodePricePerSecond
	}
	return price
}

// NewNodes is how many nodes a stage (next, that passed Check) starts after the stage before it
// (prev; nil for none) in the same bracket: in each offer, those beyond the ones prev holds
// there, which it keeps (nodes of another offer go at the SYNC).
func (m *Model) NewNodes(prev *StageAlloc, next StageAlloc) int {
	n := 0
	for _, p := range m.pools(next) {
		up := 0
		if prev != nil {
			for _, q := range m.pools(*prev) {
				if q.offer == p.offer {
					up = q.nodes
				}
			}
		}
		n += max(0, p.nodes-up)
	}
	return n
}
