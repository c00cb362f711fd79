package placement

import (
	"maps"
	"slices"
)

// PlaceTiered places a hedged stage's gangs on two reliability tiers (Proteus'): the nodes
// onDemand names are never interrupted, the others are spot. The trials critical names (the plan
// marks the chains that take longest: the last wave's) go on the on-demand nodes, the others on
// the spot ones, so that the on-demand room left over stays free for interrupted gangs
// (MoveToOnDemand); a trial that does not fit its tier then takes free room anywhere, and only
// what fits nowhere is unplaced (never placed in part). Each tier is placed as Place places,
// keeping a trial's slots of last where they are on its tier.
func PlaceTiered(nodes []Node, onDemand map[string]bool, reqs []Request, critical map[string]bool, last Placement) (Placement, []string) {
	var odNodes, spotNodes []Node
	for _, n := range nodes {
		if onDemand[n.ID] {
			odNodes = append(odNodes, n)
		} else {
			spotNodes = append(spotNodes, n)
		}
	}
	var crit, rest []Request
	for _, r := range reqs {
		if critical[r.Trial] {
			crit = append(crit, r)
		} else {
			rest = append(rest, r)
		}
	}
	onOD, _ := Place(odNodes, crit, last)
	onSpot, _ := Place(spotNodes, rest, last)
	placed := Placement{}
	maps.Copy(placed, onOD)
	maps.Copy(placed, onSpot)
	if len(placed) == len(reqs) {
		return placed, nil
	}
	// What did not fit its tier takes the room left anywhere; the placed keep their slots.
	pinned := map[string]bool{}
	for t := range placed {
		pinned[t] = true
	}
	return PlacePinned(nodes, reqs, placed, pinned)
}

// MoveToOnDemand finds on-demand room for a gang of gpus GPUs interrupted on spot (trial, its
// slots in p lost with its node): free GPUs of the nodes onDemand names, placed as Place places
// a gang (one node if it fits one, else whole nodes), displacing nobody. It returns p with the
// trial there instead, and whether there was room; p itself is not changed.
func MoveToOnDemand(nodes []Node, onDemand map[string]bool, p Placement, trial string, gpus int) (Placement, bool) {
	var odNodes []Node
	for _, n := range nodes {
		if onDemand[n.ID] {
			odNodes = append(odNodes, n)
		}
	}
	c := newCluster(odNodes)
	for _, t := range slices.Sorted(maps.Keys(p)) {
		if t == trial {
			continue
		}
		for _, s := range p[t] {
			i, ok := c.index[s.Node]
			if !ok {
				continue
			}
			for _, g := range s.GPUs {
				if g < len(c.owner[i]) {
					c.owner[i][g] = t
				}
			}
			c.size[t], c.locked[t] = p.GPUs(t), true // held where it is: never displaced
		}
	}
	if _, ok := place(c, Request{Trial: trial, GPUs: gpus}); !ok {
		return p, false
	}
	out := Placement{}
	for t, slots := range p {
		if t != trial {
			out[t] = slots
		}
	}
	out[trial] = c.placed[trial]
	return out, true
}
