package placement

import (
	"math/bits"
	"slices"
)

// Occupancy is the GPUs that running gangs hold, kept as gangs start and end, so that one more
// gang is placed beside them as PlacePinned places it (the running ones pinned, never moved)
// without rebuilding the cluster from every running gang: a stage of 10^4 gangs would otherwise
// walk them all at each launch. The nodes placed on (SetNodes) are indexed by their free GPUs,
// so that a placement costs a few words of a bitset, not a walk of every node.
type Occupancy struct {
	owner map[string]map[int]string // node -> GPU -> the trial holding it
	gangs map[string]int            // node -> gangs holding GPUs on it

	nodes []Node         // what Place places on (SetNodes), in order
	pos   map[string]int // node -> its place in nodes
	free  []int          // free GPUs of each node of nodes
	// byFree[f] is the set of nodes with f free GPUs, a bit per place in nodes; nil when the
	// nodes differ in size (Place walks them then).
	byFree [][]uint64
}

// NewOccupancy is an occupancy with nothing held and no nodes to place on.
func NewOccupancy() *Occupancy {
	return &Occupancy{owner: map[string]map[int]string{}, gangs: map[string]int{}, pos: map[string]int{}}
}

// SetNodes makes nodes, in this order, the nodes Place places on.
func (o *Occupancy) SetNodes(nodes []Node) {
	o.nodes = slices.Clone(nodes)
	o.pos = make(map[string]int, len(nodes))
	o.free = make([]int, len(nodes))
	o.byFree = nil
	uniform := len(nodes) > 0
	for i, n := range nodes {
		o.pos[n.ID] = i
		o.free[i] = o.freeOn(n)
		uniform = uniform && n.GPUs == nodes[0].GPUs
	}
	if !uniform || nodes[0].GPUs < 1 {
		return
	}
	o.byFree = make([][]uint64, nodes[0].GPUs+1)
	for f := range o.byFree {
		o.byFree[f] = make([]uint64, (len(nodes)+63)/64)
	}
	for i, f := range o.free {
		o.mark(i, f, true)
	}
}

// freeOn counts node n's GPUs no gang holds.
func (o *Occupancy) freeOn(n Node) int {
	free := n.GPUs
	for g := range o.owner[n.ID] {
		if g >= 0 && g < n.GPUs {
			free--
		}
	}
	return free
}

func (o *Occupancy) mark(i, free int, on bool) {
	if o.byFree == nil || free < 0 || free >= len(o.byFree) {
		return
	}
	if on {
		o.byFree[free][i/64] |= 1 << (i % 64)
	} else {
		o.byFree[free][i/64] &^= 1 << (i % 64)
	}
}

// recount updates node id's free GPUs after its GPUs changed hands.
func (o *Occupancy) recount(id string) {
	i, ok := o.pos[id]
	if !ok {
		return
	}
	o.mark(i, o.free[i], false)
	o.free[i] = o.freeOn(o.nodes[i])
	o.mark(i, o.free[i], true)
}

// Hold marks trial's slots held.
func (o *Occupancy) Hold(trial string, slots []Slot) {
	for _, sl := range slots {
		gpus := o.owner[sl.Node]
		if gpus == nil {
			gpus = map[int]string{}
			o.owner[sl.Node] = gpus
		}
		for _, g := range sl.GPUs {
			gpus[g] = trial
		}
		o.gangs[sl.Node]++
		o.recount(sl.Node)
	}
}

// Release frees trial's slots (those it holds: another trial's GPUs stay held).
func (o *Occupancy) Release(trial string, slots []Slot) {
	for _, sl := range slots {
		gpus := o.owner[sl.Node]
		for _, g := range sl.GPUs {
			if gpus[g] == trial {
				delete(gpus, g)
			}
		}
		if len(gpus) == 0 {
			delete(o.owner, sl.Node)
		}
		if o.gangs[sl.Node]--; o.gangs[sl.Node] <= 0 {
			delete(o.gangs, sl.Node)
		}
		o.recount(sl.Node)
	}
}

// Gangs is how many gangs hold GPUs on each node that has any; the caller must not change it.
func (o *Occupancy) Gangs() map[string]int { return o.gangs }

// Place places req on the nodes (SetNodes) beside the gangs held, as PlacePinned(nodes, held
// gangs and req, last, held gangs pinned) places it: on its last slots when they are all free,
// otherwise a part that fits one node on the free node that fits it most tightly (the first such
// node listed), a larger one on whole free nodes. A held gang is never displaced, so a gang that
// does not fit the free GPUs is not placed (false). The held gangs must lie on the nodes (or on
// nodes not listed).
func (o *Occupancy) Place(req Request, last []Slot) ([]Slot, bool) {
	if req.GPUs <= 0 {
		return nil, false
	}
	if o.fits(req, last) {
		out := make([]Slot, len(last))
		for i, sl := range last {
			out[i] = Slot{Node: sl.Node, GPUs: slices.Clone(sl.GPUs)}
		}
		return out, true
	}
	var out []Slot
	var taken []int // one slot per node per trial
	for left := req.GPUs; left > 0; {
		best := o.tightest(left, taken)
		if best < 0 {
			return nil, false
		}
		n := o.nodes[best]
		want := min(left, o.free[best])
		var gpus []int
		for g := 0; g < n.GPUs && len(gpus) < want; g++ {
			if _, held := o.owner[n.ID][g]; !held {
				gpus = append(gpus, g)
			}
		}
		out = append(out, Slot{Node: n.ID, GPUs: gpus})
		taken = append(taken, best)
		left -= want
	}
	return out, true
}

// tightest is the node for the next part of a gang that still needs left GPUs (not one of
// taken): the first of the fewest free GPUs that fit the part; a part of a node or more takes a
// whole free node. -1: none.
func (o *Occupancy) tightest(left int, taken []int) int {
	if o.byFree == nil {
		best, bestFree := -1, 0
		for i, n := range o.nodes {
			free := o.free[i]
			if slices.Contains(taken, i) || (left >= n.GPUs && free != n.GPUs) {
				continue // a multi-node gang takes whole nodes
			}
			if free >= min(left, n.GPUs) && (best < 0 || free < bestFree) {
				best, bestFree = i, free
			}
		}
		return best
	}
	size := len(o.byFree) - 1
	for f := min(left, size); f <= size; f++ {
		for w, word := range o.byFree[f] {
			for word != 0 {
				i := w*64 + bits.TrailingZeros64(word)
				if !slices.Contains(taken, i) {
					return i
				}
				word &= word - 1
			}
		}
	}
	return -1
}

// fits says whether last is a placement of req on the nodes' free GPUs (PlacePinned's keep).
func (o *Occupancy) fits(req Request, last []Slot) bool {
	if len(last) == 0 {
		return false
	}
	total := 0
	for _, sl := range last {
		i, ok := o.pos[sl.Node]
		if !ok {
			return false
		}
		for _, g := range sl.GPUs {
			if _, held := o.owner[sl.Node][g]; held || g < 0 || g >= o.nodes[i].GPUs {
				return false
			}
		}
		total += len(sl.GPUs)
	}
	return total == req.GPUs
}
