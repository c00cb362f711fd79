package planner

import (
	"fmt"
	"math"
	"slices"

	"github.com/rubberband-hpo/rubberband/sim"
)

// Greedy is the paper's Algorithm 2. On one instance type and market it warm-starts from the best
// static cluster at 1x, 2x and 3x its size (and, beyond the paper, from the largest cluster
// max_nodes allows, so that it finds a plan even when no static cluster does), each made elastic;
// then, step by step, it lowers one stage's allocation to the next factor or multiple of its
// trial count, taking the feasible candidate that saves the most cost per second of completion
// time added, until no candidate saves anything. The answer is never predicted to cost more than
// the static plan.
//
// With several offers (instance types x markets) it plans each type alone and each market alone
// the same way (recursively, down to single offers), starts from the cheapest of those plans, and
// adds two kinds of step: move one stage, or one stage and every later one of its bracket, to
// another offer (at the largest GPU option there not above its GPUs). So its plan is never
// predicted to cost more than the best single-type plan, nor the best single-market one. Where
// a type is offered in both markets, a third kind of step hedges a spot stage (Proteus'
// reliability tiers): the same GPUs with some nodes on demand, those of the critical chains or
// standby room for interrupted gangs (hedges); a step down keeps a hedged stage's shape.
//
// Hyperband's brackets share the cluster, and a plan that starts them from shares of one cluster
// cannot give one bracket a wide first stage while the others stay narrow: so, with several
// brackets, greedy then plans each bracket again in turn, the others held, from its fastest
// elastic plan in the nodes the others leave it, down the same steps over its stages alone,
// keeping it where the job is cheaper; passes repeat until no bracket improves.
func Greedy(p *Problem) Result {
	p.reset()
	return p.result("greedy", p.greedy())
}

func (p *Problem) greedy() Candidate {
	best := p.greedyOver(p.allowed())
	if len(p.brackets()) > 1 && best.Feasible {
		best = p.rebracket(best, p.allowed())
	}
	if best.Feasible {
		best = p.polish(best)
	}
	return best
}

// maxPolishPasses bounds polish's passes; each pass that changes anything makes the plan
// cheaper, so it ends anyway.
const maxPolishPasses = 50

// polish is local search on cost from a feasible plan, past where the greedy steps stop: in
// each pass it weighs, the rest of the plan held,
//   - every stage at every other option of its offer (greedy only steps down, one option at a
//     time, and not at all from a stage whose GPUs are no option: a static cluster's);
//   - every run of consecutive stages on the same nodes moved together to another node count,
//     each stage at its largest option there (moved alone, each would start or release nodes
//     for a stage or two, and pay their minimum billing and datasets);
//   - every pair of stages traded, one an option down and the other an option up (under a
//     tight deadline a stage can only get cheaper if another gets faster);
//
// and takes the cheapest feasible plan, until nothing saves.
func (p *Problem) polish(cur Candidate) Candidate {
	m := p.model()
	for range maxPolishPasses {
		best := cur
		consider := func(a sim.Alloc) {
			if c, ok := p.valid(a); ok && c.Feasible && c.Cost < best.Cost-1e-12 {
				best = c
			}
		}
		for b := range cur.Alloc {
			stages := cur.Alloc[b]
			offer := make([]int, len(stages))
			for k, sa := range stages {
				offer[k], _ = m.OfferIndex(sa)
				for _, g := range p.options(offer[k])[b][k] {
					if next := p.reshape(sa, g, offer[k]); next != sa {
						a := cur.Alloc.Clone()
						a[b][k] = next
						consider(a)
					}
				}
			}
			for k := 0; k < len(stages); {
				j := k + 1
				for j < len(stages) && stages[j].Nodes == stages[k].Nodes && offer[j] == offer[k] {
					j++
				}
				if j-k > 1 {
					p.moveRun(cur.Alloc, b, k, j, offer[k], consider)
				}
				k = j
			}
			for k, sa := range stages {
				down := stepDown(p.options(offer[k])[b][k], sa.GPUs)
				if down == 0 {
					continue
				}
				for j, sb := range stages {
					if up := stepUp(p.options(offer[j])[b][j], sb.GPUs); j != k && up > 0 {
						a := cur.Alloc.Clone()
						a[b][k] = p.reshape(sa, down, offer[k])
						a[b][j] = p.reshape(sb, up, offer[j])
						consider(a)
					}
				}
			}
		}
		if sameSplit(best.Alloc, cur.Alloc) {
			return cur
		}
		cur = best
	}
	return cur
}

// moveRun weighs stages k..j-1 of bracket b, on the same nodes of offer o in a, moved together to
// each other node count their options have, each stage at its largest option within it.
func (p *Problem) moveRun(a sim.Alloc, b, k, j, o int, consider func(sim.Alloc)) {
	offer := p.model().Offers[o]
	var counts []int
	for s := k; s < j; s++ {
		for _, g := range p.options(o)[b][s] {
			if n := offer.NodesFor(g); n != a[b][k].Nodes && !slices.Contains(counts, n) {
				counts = append(counts, n)
			}
		}
	}
	for _, n := range counts {
		next, fits := a.Clone(), true
		for s := k; s < j && fits; s++ {
			g := 0
			for _, x := range p.options(o)[b][s] {
				if offer.NodesFor(x) <= n {
					g = x
				}
			}
			fits = g > 0
			next[b][s] = p.reshape(a[b][s], max(g, 1), o)
		}
		if fits {
			consider(next)
		}
	}
}

// stepDown is the largest option below g (0: none); stepUp the smallest above it.
func stepDown(opts []int, g int) int {
	down := 0
	for _, x := range opts {
		if x < g {
			down = x
		}
	}
	return down
}

func stepUp(opts []int, g int) int {
	for _, x := range opts {
		if x > g {
			return x
		}
	}
	return 0
}

// maxBracketPasses bounds rebracket's passes over the brackets; each pass that changes anything
// makes the plan cheaper, so it ends anyway, and in practice after two or three.
const maxBracketPasses = 10

// rebracket re-plans one bracket at a time, the others held, as Greedy describes.
func (p *Problem) rebracket(cur Candidate, offers []int) Candidate {
	for range maxBracketPasses {
		improved := false
		for b := range p.brackets() {
			for _, o := range offers {
				start, ok := p.valid(p.fastestBracket(cur.Alloc, b, o))
				if !ok || !start.Feasible {
					continue
				}
				if c := p.descendOver(start, offers, b); better(c, cur) {
					cur, improved = c, true
				}
			}
		}
		if !improved {
			break
		}
	}
	return cur
}

// fastestBracket is a with bracket b on offer o at every stage's largest option within the
// nodes the other brackets of its round leave it.
func (p *Problem) fastestBracket(a sim.Alloc, b, o int) sim.Alloc {
	brackets := p.brackets()
	free := p.model().MaxNodes
	for ob := range a {
		if ob != b && brackets[ob].Round == brackets[b].Round {
			free -= a.PeakNodesOf(ob)
		}
	}
	out := a.Clone()
	out[b] = slices.Clone(a[b])
	offer := p.model().Offers[o]
	for k, opts := range p.options(o)[b] {
		g := 0
		for _, x := range opts {
			if offer.NodesFor(x) <= free {
				g = x
			}
		}
		if g == 0 {
			return a // no option fits: an allocation already weighed
		}
		out[b][k] = p.stageAlloc(g, o)
	}
	return out
}

// greedyOver is Greedy over a set of offers.
func (p *Problem) greedyOver(offers []int) Candidate {
	// A set of offers is reached through its types and through its markets: plan it once.
	key := fmt.Sprint(offers)
	if c, ok := p.memo[key]; ok {
		return c
	}
	var best Candidate
	if len(offers) == 1 {
		best = p.greedyOn(offers[0])
	} else {
		for _, sub := range p.splits(offers) {
			if c := p.greedyOver(sub); better(c, best) {
				best = c
			}
		}
		if best.Feasible {
			best = p.descend(best, offers)
		}
		if p.anyHedges(offers) {
			// A hedged stage is slower than on demand: the plans of one market leave it no time.
			// Descend, with every step, from the fastest start (the largest elastic cluster) of
			// each type that hedges, in both its markets: each step may hedge a stage of it. Only
			// those: a descent from every start of every offer made planning five times slower
			// on jobs where no hedge pays (table2-types: 0.20 s to 1.06 s, the same plan).
			for _, o := range offers {
				spot, ok := p.spotOf(o)
				if !ok || !p.hedgeable(spot, offers) {
					continue
				}
				_, n := p.static(o)
				starts := p.warmStarts(o, n)
				if start, ok := p.valid(starts[len(starts)-1]); ok && start.Feasible {
					if c := p.descend(start, offers); better(c, best) {
						best = c
					}
				}
			}
		}
	}
	if p.memo == nil {
		p.memo = map[string]Candidate{}
	}
	p.memo[key] = best
	return best
}

// splits divides a set of offers into its types and its markets: each type's offers, when there
// are several types, and each market's, when there are several markets.
func (p *Problem) splits(offers []int) [][]int {
	m := p.model()
	var byType, byMarket [][]int
	group := func(groups [][]int, o int, same func(a, b *sim.Offer) bool) [][]int {
		for i, g := range groups {
			if same(m.Offers[g[0]], m.Offers[o]) {
				groups[i] = append(g, o)
				return groups
			}
		}
		return append(groups, []int{o})
	}
	for _, o := range offers {
		byType = group(byType, o, func(a, b *sim.Offer) bool { return a.Type == b.Type })
		byMarket = group(byMarket, o, func(a, b *sim.Offer) bool { return a.Market == b.Market })
	}
	var out [][]int
	if len(byType) > 1 {
		out = append(out, byType...)
	}
	if len(byMarket) > 1 {
		out = append(out, byMarket...)
	}
	return out
}

// greedyOn is Algorithm 2 on offer o alone.
func (p *Problem) greedyOn(o int) Candidate {
	best, n := p.static(o)
	for _, a := range p.warmStarts(o, n) {
		start, ok := p.valid(a)
		if !ok || !start.Feasible {
			continue
		}
		if c := p.descend(start, []int{o}); better(c, best) {
			best = c
		}
	}
	return best
}

// warmStarts are Algorithm 2's starts on offer o: the best static cluster (n nodes, static's)
// at 1x, 2x and 3x its size and the largest, each made elastic (the largest alone when there is
// no static cluster), without repeats.
func (p *Problem) warmStarts(o, n int) []sim.Alloc {
	sizes := []int{p.model().MaxNodes}
	if n > 0 {
		sizes = []int{n, 2 * n, 3 * n, p.model().MaxNodes}
	}
	var seen []sim.Alloc
	for _, size := range sizes {
		a := p.clusterAlloc(min(size, p.model().MaxNodes), true, o)
		if !containsAlloc(seen, a) {
			seen = append(seen, a)
		}
	}
	return seen
}

// descend runs the greedy steps from a feasible start, within the given offers.
func (p *Problem) descend(cur Candidate, offers []int) Candidate {
	return p.descendOver(cur, offers, -1)
}

// descendOver is descend over bracket only's stages, or every bracket's when only < 0.
func (p *Problem) descendOver(cur Candidate, offers []int, only int) Candidate {
	m := p.model()
	for {
		var pick Candidate
		pickRatio, pickSaving := math.Inf(-1), 0.0
		consider := func(a sim.Alloc) {
			c, ok := p.valid(a)
			saving := cur.Cost - c.Cost
			if !ok || !c.Feasible || saving <= 1e-12 {
				return
			}
			ratio := math.Inf(1) // cheaper and no slower: always worth it
			if added := c.JCT - cur.JCT; added > 0 {
				ratio = saving / added
			}
			if ratio > pickRatio || (ratio == pickRatio && saving > pickSaving) {
				pick, pickRatio, pickSaving = c, ratio, saving
			}
		}
		for b := range cur.Alloc {
			if only >= 0 && b != only {
				continue
			}
			for k, sa := range cur.Alloc[b] {
				on, _ := m.OfferIndex(sa)
				opts := p.options(on)[b][k]
				if i := indexOf(opts, sa.GPUs); i > 0 {
					a := cur.Alloc.Clone()
					a[b][k] = p.reshape(sa, opts[i-1], on)
					consider(a)
				}
				// Hedge the stage, or hedge it otherwise: the same GPUs, some nodes on demand (a
				// stage on demand: some moved to spot).
				if hs, ok := p.spotOf(on); ok && p.hedgeable(hs, offers) && p.options(hs)[b][k] != nil && indexOf(p.options(hs)[b][k], sa.GPUs) >= 0 {
					for _, h := range p.hedges(b, k, sa.GPUs, hs) {
						if h != sa {
							a := cur.Alloc.Clone()
							a[b][k] = h
							consider(a)
						}
					}
				}
				for _, o := range offers {
					if o == on {
						continue
					}
					throughs := []int{k} // this stage alone, or it and every later one
					if last := len(cur.Alloc[b]) - 1; k < last {
						throughs = append(throughs, last)
					}
					for _, through := range throughs {
						a := cur.Alloc.Clone()
						fits := true
						for j := k; j <= through && fits; j++ {
							opts := p.options(o)[b][j]
							fits = len(opts) > 0
							if fits {
								a[b][j] = p.stageAlloc(snap(opts, a[b][j].GPUs), o)
							}
						}
						if fits {
							consider(a)
						}
					}
				}
			}
		}
		if pick.Alloc == nil {
			return cur
		}
		cur = pick
	}
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func containsAlloc(list []sim.Alloc, a sim.Alloc) bool {
	for _, x := range list {
		if sameGPUs(x, a) {
			return true
		}
	}
	return false
}
