package planner

import (
	"math"

	"github.com/rubberband-hpo/rubberband/sim"
)

// Greedy is the paper's Algorithm 2. It warm-starts from the best static cluster at 1x, 2x and
// 3x its size (and, beyond the paper, from the largest cluster max_nodes allows, so that it finds
// a plan even when no static cluster does), each made elastic; then, step by step, it lowers one
// stage's allocation to the next factor or multiple of its trial count, taking the feasible
// candidate that saves the most cost per second of completion time added, until no candidate
// saves anything. The answer is never predicted to cost more than the static plan.
func Greedy(p *Problem) Result {
	p.reset()
	return p.result("greedy", p.greedy())
}

func (p *Problem) greedy() Candidate {
	best, n := p.static()
	sizes := []int{p.model().MaxNodes}
	if n > 0 {
		sizes = []int{n, 2 * n, 3 * n, p.model().MaxNodes}
	}
	var seen []sim.Alloc
	for _, size := range sizes {
		size = min(size, p.model().MaxNodes)
		a := p.clusterAlloc(size, true)
		if containsAlloc(seen, a) {
			continue
		}
		seen = append(seen, a)
		start, ok := p.valid(a)
		if !ok || !start.Feasible {
			continue
		}
		if c := p.descend(start); better(c, best) {
			best = c
		}
	}
	return best
}

// descend runs the greedy steps from a feasible start.
func (p *Problem) descend(cur Candidate) Candidate {
	m := p.model()
	opts := p.options()
	for {
		var pick Candidate
		pickRatio, pickSaving := math.Inf(-1), 0.0
		for b := range cur.Alloc {
			for k, sa := range cur.Alloc[b] {
				i := indexOf(opts[b][k], sa.GPUs)
				if i <= 0 {
					continue
				}
				a := cur.Alloc.Clone()
				a[b][k] = sim.StageAlloc{GPUs: opts[b][k][i-1], Nodes: m.NodesFor(opts[b][k][i-1])}
				c, ok := p.valid(a)
				saving := cur.Cost - c.Cost
				if !ok || !c.Feasible || saving <= 1e-12 {
					continue
				}
				ratio := math.Inf(1) // cheaper and no slower: always worth it
				if added := c.JCT - cur.JCT; added > 0 {
					ratio = saving / added
				}
				if ratio > pickRatio || (ratio == pickRatio && saving > pickSaving) {
					pick, pickRatio, pickSaving = c, ratio, saving
				}
			}
		}
		if pick.Alloc == nil {
			return cur
		}
		cur = pick
	}
}

// options lists the allocation options of every stage of every bracket.
func (p *Problem) options() [][][]int {
	opts := make([][][]int, len(p.brackets()))
	for b, br := range p.brackets() {
		for _, st := range br.Stages {
			opts[b] = append(opts[b], Options(p.model(), st.Trials))
		}
	}
	return opts
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
