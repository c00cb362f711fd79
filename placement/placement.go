package placement

import (
	"sort"
)

// Node is a machine with GPUs numbered 0..GPUs-1.
type Node struct {
	ID   string
	GPUs int
}

// Request asks for a trial's GPUs.
type Request struct {
	Trial string
	GPUs  int
}

// Slot is what a trial holds on one node: some of its GPUs.
type Slot struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
}

// Placement maps a trial to its slots, one per node it spans.
type Placement map[string][]Slot

// GPUs counts the GPUs a trial holds.
func (p Placement) GPUs(trial string) int {
	n := 0
	for _, s := range p[trial] {
		n += len(s.GPUs)
	}
	return n
}

// cluster is the state placement works on: who holds each GPU.
type cluster struct {
	nodes  []Node
	index  map[string]int
	owner  [][]string // owner[node][gpu]: trial, or ""
	placed Placement
	size   map[string]int  // requested GPUs of each placed trial
	locked map[string]bool // placed in this round: cannot be displaced
}

func newCluster(nodes []Node) *cluster {
	c := &cluster{nodes: nodes, index: map[string]int{}, owner: make([][]string, len(nodes)), placed: Placement{},
		size: map[string]int{}, locked: map[string]bool{}}
	for i, n := range nodes {
		c.index[n.ID] = i
		c.owner[i] = make([]string, n.GPUs)
	}
	return c
}

func (c *cluster) free(i int) int {
	n := 0
	for _, o := range c.owner[i] {
		if o == "" {
			n++
		}
	}
	return n
}

// statement is a tentative assignment: operations are applied at once and undone by Discard.
type statement struct {
	c    *cluster
	undo []func()
}

// allocate gives trial n free GPUs of node i.
func (s *statement) allocate(trial string, i, n int) {
	var gpus []int
	for g, o := range s.c.owner[i] {
		if o == "" && len(gpus) < n {
			s.c.owner[i][g] = trial
			gpus = append(gpus, g)
		}
	}
	s.c.placed[trial] = append(s.c.placed[trial], Slot{Node: s.c.nodes[i].ID, GPUs: gpus})
	s.undo = append(s.undo, func() {
		for _, g := range gpus {
			s.c.owner[i][g] = ""
		}
		slots := s.c.placed[trial]
		s.c.placed[trial] = slots[:len(slots)-1]
		if len(s.c.placed[trial]) == 0 {
			delete(s.c.placed, trial)
		}
	})
}

// evict removes a placed trial everywhere.
func (s *statement) evict(trial string) {
	slots, size := s.c.placed[trial], s.c.size[trial]
	for _, sl := range slots {
		i := s.c.index[sl.Node]
		for _, g := range sl.GPUs {
			s.c.owner[i][g] = ""
		}
	}
	delete(s.c.placed, trial)
	delete(s.c.size, trial)
	s.undo = append(s.undo, func() {
		for _, sl := range slots {
			i := s.c.index[sl.Node]
			for _, g := range sl.GPUs {
				s.c.owner[i][g] = trial
			}
		}
		s.c.placed[trial] = slots
		s.c.size[trial] = size
	})
}

func (s *statement) discard() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// Place maps requests onto nodes. Trials of last whose GPU count is unchanged keep their slots
// when those still exist; the rest are placed largest first. It returns the new placement and the
// trials it could not place (never placed in part).
func Place(nodes []Node, reqs []Request, last Placement) (Placement, []string) {
	return PlacePinned(nodes, reqs, last, nil)
}

// PlacePinned is Place where the pinned trials (running ones, say) keep their slots in last and
// are never displaced.
func PlacePinned(nodes []Node, reqs []Request, last Placement, pinned map[string]bool) (Placement, []string) {
	c := newCluster(nodes)
	var queue []Request
	for _, r := range reqs {
		if r.GPUs > 0 && keep(c, r, last[r.Trial]) {
			c.locked[r.Trial] = pinned[r.Trial]
			continue
		}
		queue = append(queue, r)
	}
	var unplaced []string
	for len(queue) > 0 {
		sort.SliceStable(queue, func(i, j int) bool {
			if queue[i].GPUs != queue[j].GPUs {
				return queue[i].GPUs > queue[j].GPUs
			}
			return queue[i].Trial < queue[j].Trial
		})
		r := queue[0]
		queue = queue[1:]
		displaced, ok := place(c, r)
		if !ok {
			unplaced = append(unplaced, r.Trial)
			continue
		}
		queue = append(queue, displaced...)
	}
	sort.Strings(unplaced)
	return c.placed, unplaced
}

// keep re-places a trial exactly where it was, if its size is unchanged and its GPUs are there.
func keep(c *cluster, r Request, slots []Slot) bool {
	total := 0
	for _, s := range slots {
		i, ok := c.index[s.Node]
		if !ok {
			return false
		}
		for _, g := range s.GPUs {
			if g < 0 || g >= len(c.owner[i]) || c.owner[i][g] != "" {
				return false
			}
		}
		total += len(s.GPUs)
	}
	if total != r.GPUs || len(slots) == 0 {
		return false
	}
	for _, s := range slots {
		i := c.index[s.Node]
		for _, g := range s.GPUs {
			c.owner[i][g] = r.Trial
		}
		c.placed[r.Trial] = append(c.placed[r.Trial], Slot{Node: s.Node, GPUs: append([]int(nil), s.GPUs...)})
	}
	c.size[r.Trial] = r.GPUs
	return true
}

// place puts one gang on the cluster, displacing smaller unlocked trials when it must, and
// returns the displaced trials. Nothing changes when it fails.
func place(c *cluster, r Request) ([]Request, bool) {
	st := &statement{c: c}
	var displaced []Request
	left := r.GPUs
	for left > 0 {
		i, victims := bestNode(c, r, left)
		if i < 0 {
			st.discard()
			return nil, false
		}
		for _, v := range victims {
			displaced = append(displaced, Request{Trial: v, GPUs: c.size[v]})
			st.evict(v)
		}
		n := min(left, c.free(i))
		st.allocate(r.Trial, i, n)
		left -= n
	}
	c.size[r.Trial] = r.GPUs
	c.locked[r.Trial] = true
	return displaced, true
}

// bestNode picks the node for the next part of a gang that still needs left GPUs: a part that
// fits one node goes to the node that fits it most tightly; a larger one takes a whole node.
// Failing that, the node where evicting smaller, unlocked trials frees enough with the fewest GPUs
// displaced. It returns -1 when no node can take the part.
func bestNode(c *cluster, r Request, left int) (int, []string) {
	best, bestFree := -1, 0
	for i, n := range c.nodes {
		if holds(c, i, r.Trial) {
			continue // one slot per node per trial
		}
		need := min(left, n.GPUs)
		if left >= n.GPUs && c.free(i) != n.GPUs {
			continue // a multi-node trial takes whole nodes
		}
		if f := c.free(i); f >= need && (best < 0 || f < bestFree) {
			best, bestFree = i, f
		}
	}
	if best >= 0 {
		return best, nil
	}
	bestCost := 0
	var bestVictims []string
	for i, n := range c.nodes {
		if holds(c, i, r.Trial) {
			continue
		}
		need := min(left, n.GPUs)
		victims, freed := evictable(c, i, r.GPUs)
		if c.free(i)+freed < need {
			continue
		}
		// Evict the smallest trials first, only as many as needed.
		var chosen []string
		cost, free := 0, c.free(i)
		for _, v := range victims {
			if free >= need {
				break
			}
			chosen = append(chosen, v)
			free += c.size[v]
			cost += c.size[v]
		}
		if best < 0 || cost < bestCost {
			best, bestCost, bestVictims = i, cost, chosen
		}
	}
	return best, bestVictims
}

// evictable lists the trials on node i that a trial of size gpus may displace (smaller and not
// placed in this round), smallest first, and the GPUs they hold on node i.
func evictable(c *cluster, i, gpus int) ([]string, int) {
	seen := map[string]bool{}
	var victims []string
	freed := 0
	for _, o := range c.owner[i] {
		if o == "" || seen[o] {
			continue
		}
		seen[o] = true
		if c.locked[o] || c.size[o] >= gpus {
			continue
		}
		victims = append(victims, o)
		for _, s := range c.placed[o] {
			if s.Node == c.nodes[i].ID {
				freed += len(s.GPUs)
			}
		}
	}
	sort.Slice(victims, func(a, b int) bool {
		if c.size[victims[a]] != c.size[victims[b]] {
			return c.size[victims[a]] < c.size[victims[b]]
		}
		return victims[a] < victims[b]
	})
	return victims, freed
}

func holds(c *cluster, i int, trial string) bool {
	for _, o := range c.owner[i] {
		if o == trial {
			return true
		}
	}
	return false
}

// Release chooses which nodes to give back when the cluster shrinks to keep nodes: the least used
// under the placement, so that the fewest trials move (bin-packing before scale-down); ties go to
// the node listed last (the newest).
func Release(nodes []Node, keep int, p Placement) []string {
	if keep >= len(nodes) {
		return nil
	}
	used := map[string]int{}
	for _, slots := range p {
		for _, s := range slots {
			used[s.Node] += len(s.GPUs)
		}
	}
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ua, ub := used[nodes[order[a]].ID], used[nodes[order[b]].ID]
		if ua != ub {
			return ua < ub
		}
		return order[a] > order[b]
	})
	var out []string
	for _, i := range order[:len(nodes)-keep] {
		out = append(out, nodes[i].ID)
	}
	return out
}
