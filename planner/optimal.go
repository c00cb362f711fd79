package planner

import (
	"math"
	"sort"

	"github.com/rubberband-hpo/rubberband/sim"
)

// Optimal searches the plan space exactly: for one bracket (SHA, explicit stages) it returns the
// cheapest plan of all those that give every stage an offer (one of the spec's instance types in
// one of its markets) and, on it, a factor or multiple of the stage's trial count (the elastic
// options greedy walks), compared on the same Monte Carlo draws, so it never costs more than
// greedy. That is every sequence, over the stages, of (offer, GPU option) pairs: with one type and
// one market the space greedy walks; with T types and M markets T x M times the options per stage.
// A stage on another offer than the previous one starts all of its nodes (the previous ones are
// released at the SYNC). It is a depth-first branch and bound over stages with the nodes already
// up and their offer as state, starting from greedy's answer as the bound to beat. A partial plan is cut when even the fastest
// remaining stages, sample by sample, would miss the deadline quantile, or when a lower bound on
// the remaining cost cannot beat the best plan found. That bound couples time and cost: a plan
// meets the deadline only if at least `need` samples finish in time, so the sum over stages of
// the mean of each stage's `need` fastest draws (tau) fits in what is left of the deadline; the
// cheapest remaining stages under that knapsack constraint cost at least
// max over lambda >= 0 of sum_k min_o (cost_o + lambda tau_o) - lambda slack (its Lagrangian
// dual). For Hyperband it optimises one bracket at a time exactly, the others held fixed, until
// no bracket improves.
func Optimal(p *Problem) Result {
	p.reset()
	best := p.greedy()
	for pass := 0; pass < 10; pass++ {
		improved := false
		for b := range p.brackets() {
			if c := p.branchAndBound(b, best); c.Alloc != nil && better(c, best) {
				best, improved = c, true
			}
		}
		if !improved || len(p.brackets()) == 1 {
			break
		}
	}
	return p.result("optimal", best)
}

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

type bnb struct {
	p       *Problem
	b       int
	base    sim.Alloc // the incumbent; bracket b is replaced while searching
	opts    [][]stageOption
	sufT    [][]float64 // sufT[k][s]: the fastest stages k.. can be, sample by sample
	sufC    []float64   // sufC[k]: the cheapest stages k.. can be
	lambdas []float64
	sufG    [][]float64 // sufG[k][j]: sum over stages k.. of min_o (cost_o + lambdas[j] tau_o)
	scratch []float64
	others  []float64 // the completion times of the other brackets of b's round, sample by sample
	// otherRounds is how long the other rounds take, sample by sample: b's round's time adds to it.
	otherRounds []float64
	othersC     float64     // and their mean cost
	budget      int         // nodes bracket b may hold
	partial     [][]float64 // partial[k][s]: completion time of stages ..k-1
	choice      []sim.StageAlloc
	best        Candidate
	bound       float64 // cost of the cheapest feasible plan found; +Inf until there is one
	need        int
	deadline    float64
}

func (p *Problem) branchAndBound(b int, incumbent Candidate) Candidate {
	m, s := p.model(), p.Sim
	stages := p.brackets()[b].Stages
	n := s.Samples()
	t := &bnb{p: p, b: b, base: incumbent.Alloc, best: incumbent, need: p.need(), deadline: p.Deadline, budget: m.MaxNodes, lambdas: lambdaGrid()}
	t.bound = math.Inf(1)
	if incumbent.Feasible {
		t.bound = incumbent.Cost
	}
	if incumbent.Alloc == nil {
		t.base = p.clusterAlloc(m.MaxNodes, true, p.allowed()[0])
	}
	if brackets := p.brackets(); len(brackets) > 1 {
		// The others of b's round run beside it (their nodes and times bound it); the other
		// rounds before or after it (Hyperband's rounds), their times add up.
		t.others, t.otherRounds = make([]float64, n), make([]float64, n)
		rounds := sim.NewRounds(brackets, n)
		for ob := range brackets {
			if ob == b {
				rounds.Add(ob, make([]float64, n)) // b's round holds b, at 0 here
				continue
			}
			out := s.EvaluateBracket(ob, t.base[ob])
			t.othersC += mean(out.Cost)
			if brackets[ob].Round != brackets[b].Round {
				rounds.Add(ob, out.JCT)
				continue
			}
			t.budget -= t.base.PeakNodesOf(ob)
			rounds.Add(ob, make([]float64, n))
			for i := range t.others {
				t.others[i] = max(t.others[i], out.JCT[i])
			}
		}
		rounds.Total(t.otherRounds)
	}
	t.opts = make([][]stageOption, len(stages))
	for k := range stages {
		if p.stopped() {
			return Candidate{}
		}
		for _, on := range p.allowed() {
			for _, g := range p.options(on)[b][k] {
				sa := p.stageAlloc(g, on)
				if sa.Nodes > t.budget {
					continue
				}
				dur, fn, spot := s.StageTrain(b, k, sa)
				o := stageOption{alloc: sa, offer: on, dur: dur, fnCost: mean(fn), tau: t.fastMean(dur)}
				if m.PerFunction {
					o.costLB = o.fnCost
				} else {
					o.costLB = m.Offers[on].NodePricePerSecond * float64(sa.Nodes) * mean(dur)
				}
				if spot != nil { // replacements' datasets, less their unbilled SCALE: the bound stays below the cost
					o.costLB += mean(spot)
				}
				t.opts[k] = append(t.opts[k], o)
			}
		}
		if len(t.opts[k]) == 0 {
			return Candidate{}
		}
		sort.SliceStable(t.opts[k], func(i, j int) bool { return t.opts[k][i].costLB < t.opts[k][j].costLB })
	}
	K := len(stages)
	t.sufT = make([][]float64, K+1)
	t.sufC = make([]float64, K+1)
	t.sufT[K] = make([]float64, n)
	t.sufG = make([][]float64, K+1)
	t.sufG[K] = make([]float64, len(t.lambdas))
	for k := K - 1; k >= 0; k-- {
		t.sufG[k] = make([]float64, len(t.lambdas))
		for j, l := range t.lambdas {
			g := math.Inf(1)
			for _, o := range t.opts[k] {
				g = min(g, o.costLB+l*o.tau)
			}
			t.sufG[k][j] = t.sufG[k+1][j] + g
		}
		t.sufT[k] = make([]float64, n)
		cmin := math.Inf(1)
		for i := range n {
			fastest := math.Inf(1)
			for _, o := range t.opts[k] {
				fastest = min(fastest, o.dur[i])
			}
			t.sufT[k][i] = t.sufT[k+1][i] + fastest
		}
		for _, o := range t.opts[k] {
			cmin = min(cmin, o.costLB)
		}
		t.sufC[k] = t.sufC[k+1] + cmin
	}
	t.partial = make([][]float64, K+1)
	for k := range t.partial {
		t.partial[k] = make([]float64, n)
	}
	t.choice = make([]sim.StageAlloc, K)
	t.search(0, 0, 0, 0)
	return t.best
}

// search tries every option of stage k after stages that left up nodes of offer upOffer running
// and cost at least cost.
func (t *bnb) search(k, up, upOffer int, cost float64) {
	p, m := t.p, t.p.model()
	if p.stopped() {
		return
	}
	if k == len(t.choice) {
		a := t.base.Clone()
		a[t.b] = append([]sim.StageAlloc(nil), t.choice...)
		if c, ok := p.valid(a); ok && better(c, t.best) {
			t.best = c
			if c.Feasible {
				t.bound = c.Cost
			}
		}
		return
	}
	cur, next := t.partial[k], t.partial[k+1]
	for _, o := range t.opts[k] {
		newNodes := max(0, o.alloc.Nodes-up)
		if o.offer != upOffer {
			newNodes = o.alloc.Nodes // the nodes up go at the SYNC: all of this stage's are new
		}
		stageCost := o.costLB + float64(newNodes)*m.DataCost
		var prov, scale []float64
		if newNodes > 0 {
			prov, scale = p.Sim.StageProvision(t.b, k, newNodes, o.offer)
			if !m.PerFunction {
				stageCost += m.Offers[o.offer].NodePricePerSecond * (float64(o.alloc.Nodes)*mean(prov) - float64(newNodes)*mean(scale))
			}
		}
		if cost+stageCost+t.sufC[k+1] >= t.bound-1e-12 {
			continue
		}
		ok := 0
		for i := range next {
			next[i] = cur[i] + o.dur[i]
			if prov != nil {
				next[i] += prov[i]
			}
			done := next[i] + t.sufT[k+1][i]
			if t.others != nil {
				done = max(done, t.others[i]) + t.otherRounds[i]
			}
			if done <= t.deadline {
				ok++
			}
		}
		if ok < t.need {
			continue
		}
		if k+1 < len(t.choice) && cost+stageCost+t.costBound(k+1, next) >= t.bound-1e-12 {
			continue
		}
		t.choice[k] = o.alloc
		t.search(k+1, o.alloc.Nodes, o.offer, cost+stageCost)
	}
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

// costBound is the Lagrangian lower bound on the cost of stages k.. when the stages before them
// took partial (sample by sample).
func (t *bnb) costBound(k int, partial []float64) float64 {
	slack := t.deadline - t.fastMean(partial)
	if slack < 0 {
		return math.Inf(1)
	}
	lb := 0.0
	for j, l := range t.lambdas {
		lb = max(lb, t.sufG[k][j]-l*slack)
	}
	return lb
}
