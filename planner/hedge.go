package planner

import (
	"slices"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// maxStandbyGangs bounds the standby room a hedged candidate holds, in gangs: each gang's worth
// is one more interruption a stage absorbs without waiting for a replacement.
const maxStandbyGangs = 2

// minHedgeGain is how much shorter, at the deadline's quantile, a hedged stage must be than the
// same stage all on spot for greedy and optimal to weigh it: a hedge costs more per second, so
// one that does not shorten the stage is worth no more than what its on-demand nodes save the
// next stage (a scale-up), and the exact search is better without it.
const minHedgeGain = 0.01

// minHedgeInterruptions is the fewest interruptions a stage all on spot must expect for greedy
// and optimal to weigh hedging it: below it, a hedge buys next to nothing, and the options it
// would add to the exact search (several per GPU count) cost it its proof on large jobs.
const minHedgeInterruptions = 0.5

// hedgeable says whether stages on offer o may be hedged within offers: the spec allows it
// (cluster.hedge), o is one of them, a spot offer with interruptions, its type's on-demand offer is one of them too, and nodes are
// billed (per-function billing has none to hedge).
func (p *Problem) hedgeable(o int, offers []int) bool {
	m := p.model()
	if !m.Hedge || m.PerFunction || m.Offers[o].Market != spec.MarketSpot || m.Offers[o].Spot == nil {
		return false
	}
	od, ok := m.OnDemandOf(o)
	if !ok {
		return false
	}
	return slices.Contains(offers, od) && slices.Contains(offers, o)
}

// spotOf is the spot offer of offer o's type (o itself on spot).
func (p *Problem) spotOf(o int) (int, bool) {
	m := p.model()
	if m.Offers[o].Market == spec.MarketSpot {
		return o, true
	}
	return m.OfferIndex(sim.StageAlloc{Type: m.Offers[o].Type, Market: spec.MarketSpot})
}

// anyHedges says whether some stage, on some offer of offers and some GPU option there, has
// hedges within them: only then does greedy search beyond its single-market plans for them.
func (p *Problem) anyHedges(offers []int) bool {
	if p.stopped() {
		return false
	}
	for _, o := range offers {
		if !p.hedgeable(o, offers) {
			continue
		}
		for b, stages := range p.options(o) {
			for k, opts := range stages {
				for _, g := range opts {
					if len(p.hedges(b, k, g, o)) > 0 {
						return true
					}
				}
			}
		}
	}
	return false
}

// hedges lists the hedged allocations of g GPUs to stage k of bracket b on spot offer o (one
// that hedgeable allows; none when the stage all on spot expects fewer than
// minHedgeInterruptions; each shorter than it by minHedgeGain at the deadline's quantile),
// Proteus' reliability tiers: c on-demand nodes that hold the critical
// chains (none; the nodes of the chains that run one wave more, when the trials do not divide
// evenly; one gang's nodes) and s standby nodes on demand, room for interrupted gangs (up
// to maxStandbyGangs gangs' worth), each pair but (0, 0), which is the stage all on spot. Every
// one keeps a spot node and fits max_nodes.
func (p *Problem) hedges(b, k, g, o int) []sim.StageAlloc {
	if p.stopped() { // weighing hedges draws the stage: nothing once stopped
		return nil
	}
	m := p.model()
	off := m.Offers[o]
	st := p.brackets()[b].Stages[k]
	n := off.NodesFor(g)
	if p.Sim.StageInterruptions(b, k, m.On(sim.StageAlloc{GPUs: g, Nodes: n}, o)) < minHedgeInterruptions {
		return nil
	}
	spotDur, _, _ := p.Sim.StageTrain(b, k, m.On(sim.StageAlloc{GPUs: g, Nodes: n}, o))
	spotAt := sim.Quantile(spotDur, p.Quantile)
	probe := sim.StageAlloc{GPUs: g, Nodes: n}
	gpt := sim.GPUsPerTrial(st, probe)
	gang := off.NodesFor(gpt) // the nodes one gang spans (1: several share a node)
	crit := []int{0, gang}
	if slots := min(g, st.Trials); st.Trials%slots != 0 {
		crit = append(crit, off.NodesFor((st.Trials%slots)*gpt))
	}
	var out []sim.StageAlloc
	seen := map[[2]int]bool{}
	for _, c := range crit {
		for s := 0; s <= maxStandbyGangs*gang; s += gang {
			if c+s == 0 || c >= n || n+s > m.MaxNodes || seen[[2]int{c, s}] {
				continue
			}
			seen[[2]int{c, s}] = true
			h := m.On(sim.StageAlloc{GPUs: g, Nodes: n + s, OnDemand: c + s}, o)
			if dur, _, _ := p.Sim.StageTrain(b, k, h); sim.Quantile(dur, p.Quantile) < (1-minHedgeGain)*spotAt {
				out = append(out, h)
			}
		}
	}
	return out
}

// reshape is a hedged stage's shape (its standby nodes and its critical on-demand ones) at g
// GPUs instead: what greedy's step down to g keeps. An unhedged stage stays unhedged.
func (p *Problem) reshape(sa sim.StageAlloc, g, o int) sim.StageAlloc {
	next := p.stageAlloc(g, o)
	if sa.OnDemand == 0 {
		return next
	}
	off := p.model().Offers[o]
	standby := sa.Nodes - off.NodesFor(sa.GPUs)
	crit := min(sa.OnDemand-standby, next.Nodes-1)
	next.Nodes += standby
	next.OnDemand = crit + standby
	return next
}
