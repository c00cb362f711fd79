package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func nodes(n, gpus int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: fmt.Sprintf("n%03d", i), GPUs: gpus}
	}
	return out
}

// check asserts the invariants of any placement: every placed trial holds exactly what it asked
// for (never part of a gang), no GPU is held twice, GPUs exist, a trial that fits a node is on one
// node, and a trial of whole nodes holds whole nodes.
func check(t *testing.T, ns []Node, reqs []Request, p Placement, unplaced []string) {
	t.Helper()
	size := map[string]int{}
	for _, n := range ns {
		size[n.ID] = n.GPUs
	}
	asked := map[string]int{}
	for _, r := range reqs {
		asked[r.Trial] = r.GPUs
	}
	held := map[string]string{}
	for trial, slots := range p {
		if p.GPUs(trial) != asked[trial] {
			t.Fatalf("%s holds %d GPUs, asked %d", trial, p.GPUs(trial), asked[trial])
		}
		nodesUsed := map[string]bool{}
		for _, s := range slots {
			if nodesUsed[s.Node] {
				t.Fatalf("%s has two slots on %s", trial, s.Node)
			}
			nodesUsed[s.Node] = true
			for _, g := range s.GPUs {
				key := fmt.Sprintf("%s/%d", s.Node, g)
				if g < 0 || g >= size[s.Node] {
					t.Fatalf("%s holds GPU %s that does not exist", trial, key)
				}
				if other, ok := held[key]; ok {
					t.Fatalf("GPU %s held by %s and %s", key, other, trial)
				}
				held[key] = trial
			}
			if asked[trial] >= size[s.Node] && len(s.GPUs) != size[s.Node] {
				t.Fatalf("%s (%d GPUs) holds part of node %s", trial, asked[trial], s.Node)
			}
		}
		if asked[trial] <= size[slots[0].Node] && len(slots) != 1 {
			t.Fatalf("%s (%d GPUs) spread over %d nodes", trial, asked[trial], len(slots))
		}
	}
	for _, u := range unplaced {
		if _, ok := p[u]; ok {
			t.Fatalf("%s both placed and unplaced", u)
		}
	}
	if len(p)+len(unplaced) != len(reqs) {
		t.Fatalf("%d placed + %d unplaced != %d requests", len(p), len(unplaced), len(reqs))
	}
}

// randomRequests draws trials of 1, 2, 4 GPUs or whole nodes whose total fits the capacity.
func randomRequests(r *rand.Rand, gpn, capacity int) []Request {
	var reqs []Request
	total := 0
	sizes := []int{1, 2, 4, gpn, 2 * gpn}
	for i := 0; ; i++ {
		g := sizes[r.IntN(len(sizes))]
		if g > gpn && g%gpn != 0 || g > gpn*2 || (g < gpn && gpn%g != 0) {
			continue
		}
		if total+g > capacity {
			return reqs
		}
		total += g
		reqs = append(reqs, Request{Trial: fmt.Sprintf("t%04d", i), GPUs: g})
	}
}

// With homogeneous nodes and sizes that divide the node (or are whole nodes), everything that fits
// by count is placed: largest-first best fit never strands capacity.
func TestPlaceEverythingThatFits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		gpn := []int{1, 2, 4, 8}[r.IntN(4)]
		ns := nodes(1+r.IntN(12), gpn)
		reqs := randomRequests(r, gpn, len(ns)*gpn)
		p, unplaced := Place(ns, reqs, nil)
		check(t, ns, reqs, p, unplaced)
		if len(unplaced) > 0 {
			t.Fatalf("unplaced %v with %d nodes of %d: %v", unplaced, len(ns), gpn, reqs)
		}
	}
}

// Overcommitted requests: invariants hold, gangs are whole or absent.
func TestPlaceOvercommitted(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		gpn := []int{2, 4, 8}[r.IntN(3)]
		ns := nodes(1+r.IntN(8), gpn)
		reqs := randomRequests(r, gpn, 3*len(ns)*gpn)
		p, unplaced := Place(ns, reqs, nil)
		check(t, ns, reqs, p, unplaced)
	}
}

// A valid last placement for the same requests is kept exactly; changed trials move, others stay.
func TestPreserveAssignments(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		ns := nodes(2+r.IntN(8), 4)
		reqs := randomRequests(r, 4, len(ns)*4)
		first, _ := Place(ns, reqs, nil)
		again, unplaced := Place(ns, reqs, first)
		if len(unplaced) > 0 || fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("replacing the same requests moved trials:\n%v\n%v", first, again)
		}
		// Halve the cluster's demand: the trials that kept their size keep their slots.
		var next []Request
		for i, q := range reqs {
			if i%2 == 0 {
				next = append(next, q)
			}
		}
		p, _ := Place(ns, next, first)
		for _, q := range next {
			if fmt.Sprint(p[q.Trial]) != fmt.Sprint(first[q.Trial]) {
				t.Fatalf("%s moved from %v to %v", q.Trial, first[q.Trial], p[q.Trial])
			}
		}
	}
}

// A larger trial displaces smaller ones to get a whole node, and the displaced ones are re-placed.
func TestDisplaceSmaller(t *testing.T) {
	ns := nodes(2, 4)
	last := Placement{"small-a": {{Node: "n000", GPUs: []int{0}}}, "small-b": {{Node: "n001", GPUs: []int{0}}}}
	reqs := []Request{{"small-a", 1}, {"small-b", 1}, {"big", 4}}
	p, unplaced := Place(ns, reqs, last)
	check(t, ns, reqs, p, unplaced)
	if len(unplaced) != 0 {
		t.Fatalf("unplaced %v: %v", unplaced, p)
	}
	bigNode := p["big"][0].Node
	if p["small-a"][0].Node == bigNode || p["small-b"][0].Node == bigNode {
		t.Fatalf("small trial left on the big trial's node: %v", p)
	}
	// Too big for the cluster: nothing of it is placed and nothing else is disturbed.
	reqs = []Request{{"small-a", 1}, {"huge", 12}}
	p, unplaced = Place(ns, reqs, last)
	check(t, ns, reqs, p, unplaced)
	if len(unplaced) != 1 || unplaced[0] != "huge" || fmt.Sprint(p["small-a"]) != fmt.Sprint(last["small-a"]) {
		t.Fatalf("placement %v, unplaced %v", p, unplaced)
	}
}

func TestRelease(t *testing.T) {
	ns := nodes(4, 4)
	p := Placement{"a": {{Node: "n000", GPUs: []int{0, 1, 2, 3}}}, "b": {{Node: "n002", GPUs: []int{0}}}}
	got := fmt.Sprint(Release(ns, 2, p))
	if got != "[n003 n001]" {
		t.Fatalf("released %s, want the two empty nodes, newest first", got)
	}
	if got := fmt.Sprint(Release(ns, 1, p)); got != "[n003 n001 n002]" {
		t.Fatalf("released %s", got)
	}
	if Release(ns, 4, p) != nil {
		t.Fatal("released nodes without shrinking")
	}
}

func BenchmarkPlace1000Trials250Nodes(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	ns := nodes(250, 4)
	reqs := randomRequests(r, 4, 1000)
	for len(reqs) < 1000 {
		reqs = append(reqs, Request{Trial: fmt.Sprintf("x%04d", len(reqs)), GPUs: 1})
	}
	for b.Loop() {
		Place(ns, reqs, nil)
	}
}
