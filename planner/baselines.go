package planner

import (
	"github.com/rubberband-hpo/rubberband/sim"
)

func (p *Problem) reset() {
	p.evaluated = 0
	p.fastest = Candidate{}
	p.memo = nil
}

// Static finds the cheapest fixed cluster that meets the deadline: it tries every cluster size
// up to max_nodes, each stage sharing the cluster fairly among its trials (paper §3.2), of every
// offered instance type and market (one for the whole run).
func Static(p *Problem) Result {
	p.reset()
	var best Candidate
	for _, o := range p.allowed() {
		if c, _ := p.static(o); better(c, best) {
			best = c
		}
	}
	return p.result("static", best)
}

// static returns the best static candidate on offer o and its cluster size (0 when none fits).
func (p *Problem) static(o int) (Candidate, int) {
	m := p.model()
	var best Candidate
	bestN := 0
	var prev sim.Alloc
	for n := len(p.brackets()); n <= m.MaxNodes; n++ {
		a := p.clusterAlloc(n, false, o)
		if sameGPUs(a, prev) {
			continue // more nodes, same work: dearer and no faster
		}
		prev = a
		c, ok := p.valid(a)
		if ok && better(c, best) {
			best, bestN = c, n
		}
	}
	return best, bestN
}

// clusterAlloc shares a cluster of n nodes of offer o: brackets get nodes in proportion to their
// work (each at least one), and each stage gives its trials a fair share of its bracket's GPUs.
// A static allocation holds its bracket's nodes in every stage; an elastic one holds only what
// each stage uses, with every stage's GPUs snapped down to a factor or multiple of its trials.
func (p *Problem) clusterAlloc(n int, elastic bool, o int) sim.Alloc {
	m := p.model()
	offer := m.Offers[o]
	shares := splitNodes(p, n)
	a := make(sim.Alloc, len(p.brackets()))
	for b, br := range p.brackets() {
		gpus := shares[b] * offer.GPUsPerNode
		for k, st := range br.Stages {
			g := fairShare(offer, st.Trials, gpus)
			sa := m.On(sim.StageAlloc{GPUs: g, Nodes: shares[b]}, o)
			if elastic {
				sa = p.stageAlloc(snap(p.options(o)[b][k], g), o)
			}
			a[b] = append(a[b], sa)
		}
	}
	return a
}

// fairShare gives n trials at most gpus GPUs: one GPU each in waves when there are fewer GPUs
// than trials, else the largest placeable equal share.
func fairShare(m *sim.Offer, n, gpus int) int {
	if n >= gpus {
		return gpus
	}
	g := 1
	for c := 1; c*n <= gpus && c <= m.MaxGPUsPerTrial(); c++ {
		if m.ValidTrialGPUs(c) {
			g = c
		}
	}
	return g * n
}

// splitNodes divides n nodes among brackets in proportion to their work at one GPU per trial
// (largest remainder), each bracket getting at least one.
func splitNodes(p *Problem, n int) []int {
	brackets := p.brackets()
	shares := make([]int, len(brackets))
	if len(brackets) == 1 {
		shares[0] = n
		return shares
	}
	work := make([]float64, len(brackets))
	total := 0.0
	for b, br := range brackets {
		for _, st := range br.Stages {
			work[b] += float64(st.Trials * st.Iters)
		}
		total += work[b]
	}
	left := n
	rem := make([]float64, len(brackets))
	for b := range brackets {
		exact := float64(n-len(brackets)) * work[b] / total
		shares[b] = 1 + int(exact)
		rem[b] = exact - float64(int(exact))
		left -= shares[b]
	}
	for ; left > 0; left-- {
		top := 0
		for b := range rem {
			if rem[b] > rem[top] {
				top = b
			}
		}
		shares[top]++
		rem[top] = -1
	}
	return shares
}

// sameSplit reports whether two allocations give every stage the same GPUs of the same offer,
// with as many of its nodes on demand (a re-plan that changes only a stage's hedge changes it).
func sameSplit(a, b sim.Alloc) bool {
	return sameStages(a, b, func(x, y sim.StageAlloc) bool { return sameOffer(x, y) && x.OnDemand == y.OnDemand })
}

// sameGPUs reports whether two allocations give every stage the same GPUs of the same offer.
func sameGPUs(a, b sim.Alloc) bool { return sameStages(a, b, sameOffer) }

func sameOffer(x, y sim.StageAlloc) bool {
	return x.GPUs == y.GPUs && x.Type == y.Type && x.Market == y.Market
}

// sameStages reports whether two allocations have the same brackets of the same lengths, and
// same holds of each pair of their stages.
func sameStages(a, b sim.Alloc, same func(x, y sim.StageAlloc) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for k := range a[i] {
			if !same(a[i][k], b[i][k]) {
				return false
			}
		}
	}
	return true
}

// NaiveElastic gives every trial the same GPU count in every stage and shrinks the cluster as
// trials are cut: the baseline of the paper's Table 2 (after Determined's elastic ASHA).
func NaiveElastic(p *Problem) Result {
	p.reset()
	m := p.model()
	var best Candidate
	for _, o := range p.allowed() {
		offer := m.Offers[o]
		for g := 1; g <= offer.MaxGPUsPerTrial(); g++ {
			if !offer.ValidTrialGPUs(g) {
				continue
			}
			a := make(sim.Alloc, len(p.brackets()))
			for b, br := range p.brackets() {
				for _, st := range br.Stages {
					a[b] = append(a[b], p.stageAlloc(st.Trials*g, o))
				}
			}
			if c, ok := p.valid(a); ok && better(c, best) {
				best = c
			}
		}
	}
	return p.result("naive-elastic", best)
}
