package planner

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/rubberband-hpo/rubberband/sim"
)

// Optimal searches the plan space exactly: it returns the cheapest plan of all those that give
// every stage of every bracket an offer (one of the spec's instance types in one of its markets)
// and, on it, a factor or multiple of the stage's trial count (the elastic options greedy walks),
// compared on the same Monte Carlo draws, so it never costs more than greedy. With one type and
// one market that is the space greedy walks; with T types and M markets T x M times the options
// per stage. A stage on another offer than the previous one starts all of its nodes (the previous
// ones are released at the SYNC).
//
// Hyperband's brackets are planned jointly: they share one elastic cluster (the brackets of a
// round hold at most max_nodes between them) and one deadline (the job ends with its slowest
// bracket), so the cheapest plan of the job is not the cheapest plan of each bracket alone. It is
// a depth-first branch and bound over the stages of every bracket, bracket after bracket, with the
// nodes already up and their offer as state, starting from the best of greedy's answer and of
// planning one bracket at a time exactly, the others held, until no bracket improves (a good
// incumbent prunes most of the joint space). A partial plan is cut when
//   - even the fastest remaining stages and brackets, sample by sample, would miss the deadline
//     quantile;
//   - the brackets of a round would need more than max_nodes, each one not yet planned at the
//     fewest nodes any of its plans peaks at;
//   - a lower bound on the remaining cost cannot beat the best plan found. That bound couples
//     time and cost: a plan meets the deadline only if at least `need` samples finish in time, so
//     for each bracket the sum over its stages of the mean of each stage's `need` fastest draws
//     (tau) fits in what is left of the deadline; the cheapest remaining stages under that
//     knapsack constraint cost at least max over lambda >= 0 of
//     sum_k min_o (cost_o + lambda tau_o) - lambda slack (its Lagrangian dual), and the brackets'
//     bounds add up.
//
// A job so large that the joint search passes maxJointNodes partial plans keeps the best plan
// found (Result.Exact false): at least as cheap as one bracket at a time.
func Optimal(p *Problem) Result {
	p.reset()
	best := p.bracketAtATime(p.greedy())
	all := make([]int, len(p.brackets()))
	for b := range all {
		all[b] = b
	}
	best, exact := p.branchAndBound(all, best, maxJointNodes)
	res := p.result("optimal", best)
	res.Exact = exact && !p.stopped()
	return res
}

// bracketAtATime plans one bracket at a time exactly, the others held, from best, until no
// bracket improves: the joint search's incumbent (one bracket: best as it is).
func (p *Problem) bracketAtATime(best Candidate) Candidate {
	if len(p.brackets()) == 1 {
		return best
	}
	for range maxBracketPasses {
		improved := false
		for b := range p.brackets() {
			if c, _ := p.branchAndBound([]int{b}, best, 0); c.Alloc != nil && better(c, best) {
				best, improved = c, true
			}
		}
		if !improved {
			break
		}
	}
	return best
}

// maxJointNodes bounds the partial plans the joint search weighs (about a second's work per
// million): past it, Optimal keeps the best plan found.
const maxJointNodes = 3_000_000

// stageOption is one allocation of one stage, with its draws.
type stageOption struct {
	alloc  sim.StageAlloc
	offer  int
	dur    []float64 // start-to-SYNC draws, without scale-up
	costLB float64   // a lower bound on the stage's mean cost with no scale-up
	fnCost float64   // mean per-function cost
	tau    float64   // mean of the need fastest draws of dur
}

// lambdaGrid returns the prices of time ($/s) at which the Lagrangian bound is evaluated; any
// lambda gives a valid bound, more of them a tighter one.
func lambdaGrid() []float64 {
	l := []float64{0}
	for x := 1e-7; x < 1e3; x *= 1.5 {
		l = append(l, x)
	}
	return l
}

// space is one bracket the search plans: its stages' options and the bounds over the stages
// after each.
type space struct {
	b, round int // the bracket, and its round's index in bnb.done
	opts     [][]stageOption
	sufT     [][]float64 // sufT[k][s]: the fastest stages k.. can be, sample by sample
	sufC     []float64   // sufC[k]: the cheapest stages k.. can be
	sufG     [][]float64 // sufG[k][j]: sum over stages k.. of min_o (cost_o + lambdas[j] tau_o)
	minPeak  int         // the fewest nodes any plan of the bracket peaks at
	floor    float64     // a lower bound on the bracket's cost, whatever its plan
	partial  [][]float64 // partial[k][s]: completion time of stages ..k-1
	choice   []sim.StageAlloc
}

type bnb struct {
	p        *Problem
	base     sim.Alloc // the incumbent; the searched brackets are replaced while searching
	free     []*space  // the brackets searched, in search order
	lambdas  []float64
	scratch  []float64
	need     int
	deadline float64
	maxNodes int

	// done[r][s]: the latest finish, sample by sample, of the brackets of round r settled so far
	// (those held, and the searched ones already planned), from the round's start; saved[j] what
	// done of free[j]'s round was before free[j] was settled.
	done  [][]float64
	saved [][]float64
	// fastAfter[j][r][s]: the latest of the fastest finishes of free[j..] in round r.
	fastAfter [][][]float64
	// peak[r]: the nodes of round r the settled brackets hold; minPeakAfter[j][r] the fewest
	// free[j..] of round r can.
	peak         []int
	minPeakAfter [][]int
	floorAfter   []float64 // floorAfter[j]: the sum of free[j..]'s floors
	heldCost     float64   // the mean cost of the brackets held

	best   Candidate
	bound  float64 // cost of the cheapest feasible plan found; +Inf until there is one
	nodes  int     // partial plans weighed
	limit  int     // 0: no limit
	capped bool    // the limit was reached
}

// branchAndBound searches the given brackets jointly, the others held as the incumbent has
// them, and returns the best plan found and whether the search was complete (limit 0: no bound
// on the partial plans weighed).
func (p *Problem) branchAndBound(searched []int, incumbent Candidate, limit int) (Candidate, bool) {
	m, s := p.model(), p.Sim
	brackets := p.brackets()
	n := s.Samples()
	t := &bnb{p: p, base: incumbent.Alloc, best: incumbent, need: p.need(), deadline: p.Deadline,
		maxNodes: m.MaxNodes, lambdas: lambdaGrid(), limit: limit, bound: math.Inf(1)}
	if incumbent.Feasible {
		t.bound = incumbent.Cost
	}
	if incumbent.Alloc == nil {
		t.base = p.clusterAlloc(m.MaxNodes, true, p.allowed()[0])
	}
	roundOf := map[int]int{} // a bracket's round, as an index in t.done
	for _, br := range brackets {
		if _, ok := roundOf[br.Round]; !ok {
			roundOf[br.Round] = len(t.done)
			t.done = append(t.done, make([]float64, n))
		}
	}
	R := len(t.done)
	t.peak = make([]int, R)
	isFree := map[int]bool{}
	for _, b := range searched {
		isFree[b] = true
	}
	for b := range brackets {
		if isFree[b] {
			sp := t.space(b, roundOf[brackets[b].Round])
			if sp == nil {
				return Candidate{}, !p.stopped()
			}
			t.free = append(t.free, sp)
			continue
		}
		r := roundOf[brackets[b].Round]
		out := s.EvaluateBracket(b, t.base[b])
		t.heldCost += mean(out.Cost)
		t.peak[r] += t.base.PeakNodesOf(b)
		for i, x := range out.JCT {
			t.done[r][i] = max(t.done[r][i], x)
		}
	}
	// The dearest brackets first: what they cost settles most of the bound.
	slices.SortStableFunc(t.free, func(a, b *space) int { return cmp.Compare(b.floor, a.floor) })
	J := len(t.free)
	t.saved = make([][]float64, J)
	t.fastAfter = make([][][]float64, J+1)
	t.minPeakAfter = make([][]int, J+1)
	t.floorAfter = make([]float64, J+1)
	t.fastAfter[J], t.minPeakAfter[J] = make([][]float64, R), make([]int, R)
	for r := range R {
		t.fastAfter[J][r] = make([]float64, n)
	}
	for j := J - 1; j >= 0; j-- {
		sp := t.free[j]
		t.saved[j] = make([]float64, n)
		t.floorAfter[j] = t.floorAfter[j+1] + sp.floor
		t.minPeakAfter[j] = slices.Clone(t.minPeakAfter[j+1])
		t.minPeakAfter[j][sp.round] += sp.minPeak
		t.fastAfter[j] = make([][]float64, R)
		for r := range R {
			t.fastAfter[j][r] = slices.Clone(t.fastAfter[j+1][r])
		}
		for i, x := range sp.sufT[0] {
			t.fastAfter[j][sp.round][i] = max(t.fastAfter[j][sp.round][i], x)
		}
	}
	if J > 0 {
		t.search(0, 0, nil, 0, 0)
	}
	return t.best, !t.capped && !p.stopped()
}

// space lists bracket b's options and their bounds (nil when a stage has none that fits).
func (t *bnb) space(b, round int) *space {
	p, m, s := t.p, t.p.model(), t.p.Sim
	stages := p.brackets()[b].Stages
	n := s.Samples()
	K := len(stages)
	sp := &space{b: b, round: round, opts: make([][]stageOption, K)}
	for k := range stages {
		if p.stopped() {
			return nil
		}
		fewest := math.MaxInt
		for _, on := range p.allowed() {
			for _, g := range p.options(on)[b][k] {
				sas := []sim.StageAlloc{p.stageAlloc(g, on)}
				if p.hedgeable(on, p.allowed()) {
					sas = append(sas, p.hedges(b, k, g, on)...)
				}
				for _, sa := range sas {
					if sa.Nodes > t.maxNodes {
						continue
					}
					dur, fn, spot := s.StageTrain(b, k, sa)
					o := stageOption{alloc: sa, offer: on, dur: dur, fnCost: mean(fn), tau: t.fastMean(dur)}
					switch {
					case m.PerFunction:
						o.costLB = o.fnCost
					case sa.OnDemand > 0:
						o.costLB = m.HoldPrice(sa) * mean(dur)
					default:
						o.costLB = m.Offers[on].NodePricePerSecond * float64(sa.Nodes) * mean(dur)
					}
					if spot != nil { // replacements' datasets, less their unbilled SCALE: the bound stays below the cost
						o.costLB += mean(spot)
					}
					sp.opts[k] = append(sp.opts[k], o)
					fewest = min(fewest, sa.Nodes)
				}
			}
		}
		if len(sp.opts[k]) == 0 {
			return nil
		}
		sp.minPeak = max(sp.minPeak, fewest)
		sort.SliceStable(sp.opts[k], func(i, j int) bool { return sp.opts[k][i].costLB < sp.opts[k][j].costLB })
	}
	sp.sufT = make([][]float64, K+1)
	sp.sufC = make([]float64, K+1)
	sp.sufT[K] = make([]float64, n)
	sp.sufG = make([][]float64, K+1)
	sp.sufG[K] = make([]float64, len(t.lambdas))
	for k := K - 1; k >= 0; k-- {
		sp.sufG[k] = make([]float64, len(t.lambdas))
		for j, l := range t.lambdas {
			g := math.Inf(1)
			for _, o := range sp.opts[k] {
				g = min(g, o.costLB+l*o.tau)
			}
			sp.sufG[k][j] = sp.sufG[k+1][j] + g
		}
		sp.sufT[k] = make([]float64, n)
		for i := range n {
			fastest := math.Inf(1)
			for _, o := range sp.opts[k] {
				fastest = min(fastest, o.dur[i])
			}
			sp.sufT[k][i] = sp.sufT[k+1][i] + fastest
		}
		cmin := math.Inf(1)
		for _, o := range sp.opts[k] {
			cmin = min(cmin, o.costLB)
		}
		sp.sufC[k] = sp.sufC[k+1] + cmin
	}
	sp.floor = max(sp.sufC[0], t.lagrangian(sp, 0, t.deadline))
	sp.partial = make([][]float64, K+1)
	for k := range sp.partial {
		sp.partial[k] = make([]float64, n)
	}
	sp.choice = make([]sim.StageAlloc, K)
	return sp
}

// search tries every option of stage k of free[j], after stages that left up the nodes of prev
// (nil: none) running, peaked at peak nodes, and cost at least cost (every bracket before it
// included).
func (t *bnb) search(j, k int, prev *sim.StageAlloc, peak int, cost float64) {
	p, m := t.p, t.p.model()
	if p.stopped() || t.capped {
		return
	}
	sp := t.free[j]
	if k == len(sp.choice) {
		t.settled(j, peak, cost)
		return
	}
	budget := t.maxNodes - t.peak[sp.round] - t.minPeakAfter[j+1][sp.round]
	cur, next := sp.partial[k], sp.partial[k+1]
	for _, o := range sp.opts[k] {
		if o.alloc.Nodes > budget {
			continue
		}
		if t.nodes++; t.limit > 0 && t.nodes > t.limit {
			t.capped = true
			return
		}
		// Nodes of another offer go at the SYNC: the stage starts those beyond what it keeps.
		newNodes := m.NewNodes(prev, o.alloc)
		stageCost := o.costLB + float64(newNodes)*m.DataCost
		var prov, scale []float64
		if newNodes > 0 {
			prov, scale = p.Sim.StageProvision(sp.b, k, newNodes, o.offer)
			switch {
			case m.PerFunction:
			case o.alloc.OnDemand > 0: // new nodes' unbilled SCALE at the dearer price: still a bound
				od, _ := m.OnDemandOf(o.offer)
				stageCost += m.HoldPrice(o.alloc)*mean(prov) - m.Offers[od].NodePricePerSecond*float64(newNodes)*mean(scale)
			default:
				stageCost += m.Offers[o.offer].NodePricePerSecond * (float64(o.alloc.Nodes)*mean(prov) - float64(newNodes)*mean(scale))
			}
		}
		rest := t.floorAfter[j+1] // the brackets after this one
		if cost+stageCost+sp.sufC[k+1]+rest >= t.bound-1e-12 {
			continue
		}
		for i := range next {
			next[i] = cur[i] + o.dur[i]
			if prov != nil {
				next[i] += prov[i]
			}
		}
		if !t.mayMeet(j, sp.sufT[k+1], next) {
			continue
		}
		if k+1 < len(sp.choice) && cost+stageCost+t.lagrangian(sp, k+1, t.deadline-t.fastMean(next))+rest >= t.bound-1e-12 {
			continue
		}
		sp.choice[k] = o.alloc
		t.search(j, k+1, &sp.choice[k], max(peak, o.alloc.Nodes), cost+stageCost)
	}
}

// settled goes on once free[j] is planned, peaking at peak nodes: to the next bracket, or, after
// the last, to the plan itself.
func (t *bnb) settled(j, peak int, cost float64) {
	p, sp := t.p, t.free[j]
	if j+1 < len(t.free) {
		done := t.done[sp.round]
		copy(t.saved[j], done)
		for i, x := range sp.partial[len(sp.choice)] {
			done[i] = max(done[i], x)
		}
		t.peak[sp.round] += peak
		t.search(j+1, 0, nil, 0, cost)
		t.peak[sp.round] -= peak
		copy(done, t.saved[j])
		return
	}
	a := t.base.Clone()
	for _, f := range t.free {
		a[f.b] = slices.Clone(f.choice)
	}
	if c, ok := p.valid(a); ok && better(c, t.best) {
		t.best = c
		if c.Feasible {
			t.bound = c.Cost
		}
	}
}

// mayMeet reports whether enough samples may still meet the deadline when free[j] has reached
// its partial times so far and its remaining stages take at least rest: each round ends with its
// latest bracket, settled or not (those not yet planned at their fastest), and rounds add up.
func (t *bnb) mayMeet(j int, rest, partial []float64) bool {
	sp, ok := t.free[j], 0
	after := t.fastAfter[j+1]
	for i := range partial {
		total := 0.0
		for r, done := range t.done {
			end := max(done[i], after[r][i])
			if r == sp.round {
				end = max(end, partial[i]+rest[i])
			}
			total += end
		}
		if total <= t.deadline {
			ok++
		}
	}
	return ok >= t.need
}

// fastMean is the mean of the need smallest values of xs.
func (t *bnb) fastMean(xs []float64) float64 {
	t.scratch = append(t.scratch[:0], xs...)
	sort.Float64s(t.scratch)
	sum := 0.0
	for _, x := range t.scratch[:t.need] {
		sum += x
	}
	return sum / float64(t.need)
}

// lagrangian is the Lagrangian lower bound on the cost of sp's stages k.. when slack seconds are
// left to them.
func (t *bnb) lagrangian(sp *space, k int, slack float64) float64 {
	if slack < 0 {
		return math.Inf(1)
	}
	lb := 0.0
	for j, l := range t.lambdas {
		lb = max(lb, sp.sufG[k][j]-l*slack)
	}
	return lb
}
