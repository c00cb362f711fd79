package placement

import "slices"

// Occupancy is the GPUs that running gangs hold, kept as gangs start and end, so that one more
// gang is placed beside them as PlacePinned places it (the running ones pinned, never moved)
// without rebuilding the cluster from every running gang: a stage of 10^4 gangs would otherwise
// walk them all at each launch.
type Occupancy struct {
	owner map[string]map[int]string // node -> GPU -> the trial holding it
	gangs map[string]int            // node -> gangs holding GPUs on it
}

// NewOccupancy is an occupancy with nothing held.
func NewOccupancy() *Occupancy {
	return &Occupancy{owner: map[string]map[int]string{}, gangs: map[string]int{}}
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
	}
}

// Gangs is how many gangs hold GPUs on each node that has any; the caller must not change it.
func (o *Occupancy) Gangs() map[string]int { return o.gangs }

// Place places req on nodes beside the gangs held, as PlacePinned(nodes, held gangs and req,
// last, held gangs pinned) places it: on its last slots when they are all free, otherwise a part
// that fits one node on the free node that fits it most tightly (the first such node listed), a
// larger one on whole free nodes. A held gang is never displaced, so a gang that does not fit the
// free GPUs is not placed (false). The held gangs must lie on nodes (or on nodes not listed).
func (o *Occupancy) Place(nodes []Node, req Request, last []Slot) ([]Slot, bool) {
	if req.GPUs <= 0 {
		return nil, false
	}
	if o.fits(nodes, req, last) {
		out := make([]Slot, len(last))
		for i, sl := range last {
			out[i] = Slot{Node: sl.Node, GPUs: slices.Clone(sl.GPUs)}
		}
		return out, true
	}
	var out []Slot
	taken := map[string]bool{} // one slot per node per trial
	for left := req.GPUs; left > 0; {
		best, bestFree := -1, 0
		for i, n := range nodes {
			if taken[n.ID] {
				continue
			}
			free := n.GPUs - len(o.owner[n.ID])
			if left >= n.GPUs && free != n.GPUs {
				continue // a multi-node gang takes whole nodes
			}
			if free >= min(left, n.GPUs) && (best < 0 || free < bestFree) {
				best, bestFree = i, free
			}
		}
		if best < 0 {
			return nil, false
		}
		n := nodes[best]
		want := min(left, bestFree)
		var gpus []int
		for g := 0; g < n.GPUs && len(gpus) < want; g++ {
			if _, held := o.owner[n.ID][g]; !held {
				gpus = append(gpus, g)
			}
		}
		out = append(out, Slot{Node: n.ID, GPUs: gpus})
		taken[n.ID] = true
		left -= want
	}
	return out, true
}

// fits says whether last is a placement of req on nodes' free GPUs (PlacePinned's keep).
func (o *Occupancy) fits(nodes []Node, req Request, last []Slot) bool {
	if len(last) == 0 {
		return false
	}
	total := 0
	for _, sl := range last {
		i := slices.IndexFunc(nodes, func(n Node) bool { return n.ID == sl.Node })
		if i < 0 {
			return false
		}
		for _, g := range sl.GPUs {
			if _, held := o.owner[sl.Node][g]; held || g < 0 || g >= nodes[i].GPUs {
				return false
			}
		}
		total += len(sl.GPUs)
	}
	return total == req.GPUs
}
