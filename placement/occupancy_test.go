package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Occupancy.Place places a gang exactly where PlacePinned places it beside the same running
// gangs, pinned: over random clusters of mixed node sizes (walked) and of one size (indexed by
// free GPUs), gangs of every size starting and ending, some relaunched where they last ran,
// nodes added and idle ones removed.
func TestOccupancyPlacesAsPlacePinned(t *testing.T) {
	for seed := uint64(1); seed <= 400; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		sizes := []int{1, 2, 4, 8}
		if seed%2 == 0 {
			sizes = []int{sizes[r.IntN(len(sizes))]}
		}
		var ns []Node
		for i := range 1 + r.IntN(12) {
			ns = append(ns, Node{ID: fmt.Sprintf("n%02d", i), GPUs: sizes[r.IntN(len(sizes))]})
		}
		occ := NewOccupancy()
		occ.SetNodes(ns)
		running := Placement{}
		last := Placement{}
		var ended []string
		for step := range 60 {
			if r.IntN(10) == 0 { // a node comes, or an idle one goes
				if i := r.IntN(len(ns) + 1); i < len(ns) && occ.Gangs()[ns[i].ID] == 0 && len(ns) > 1 {
					ns = slices.Delete(slices.Clone(ns), i, i+1)
				} else {
					ns = append(slices.Clone(ns), Node{ID: fmt.Sprintf("m%02d", step), GPUs: sizes[r.IntN(len(sizes))]})
				}
				occ.SetNodes(ns)
				continue
			}
			if len(running) > 0 && r.IntN(3) == 0 { // a gang ends
				ids := slices.Sorted(maps.Keys(running))
				id := ids[r.IntN(len(ids))]
				occ.Release(id, running[id])
				delete(running, id)
				ended = append(ended, id)
				continue
			}
			id := fmt.Sprintf("t%03d", step)
			gpus := []int{1, 1, 2, 4, 8, 16}[r.IntN(6)]
			if len(ended) > 0 && r.IntN(2) == 0 { // relaunched: where it last ran, if free
				id = ended[0]
				ended = ended[1:]
				gpus = last.GPUs(id)
			}
			req := Request{Trial: id, GPUs: gpus}
			var reqs []Request
			pinned := map[string]bool{}
			for _, tr := range slices.Sorted(maps.Keys(running)) {
				reqs = append(reqs, Request{Trial: tr, GPUs: running.GPUs(tr)})
				pinned[tr] = true
			}
			want, unplaced := PlacePinned(ns, append(reqs, req), last, pinned)
			got, ok := occ.Place(req, last[id])
			if ok == slices.Contains(unplaced, id) || (ok && !reflect.DeepEqual(got, want[id])) {
				t.Fatalf("seed %d step %d: %s of %d GPUs on %v beside %v: Occupancy placed %v (%v), PlacePinned %v (unplaced %v)",
					seed, step, id, gpus, ns, running, got, ok, want[id], unplaced)
			}
			for tr := range running {
				if !reflect.DeepEqual(want[tr], running[tr]) {
					t.Fatalf("seed %d step %d: PlacePinned moved running %s", seed, step, tr)
				}
			}
			if ok {
				running[id], last[id] = got, got
				occ.Hold(id, got)
			}
		}
		for id, slots := range running {
			occ.Release(id, slots)
		}
		if len(occ.Gangs()) != 0 || len(occ.owner) != 0 {
			t.Fatalf("seed %d: everything released, yet held: %v %v", seed, occ.Gangs(), occ.owner)
		}
	}
}

// Placing one more gang beside 9,999 running ones on 2,500 four-GPU nodes (issue 39: the stage
// loop places a gang at every launch; PlacePinned rebuilt the cluster from every running gang).
func BenchmarkOccupancyPlace(b *testing.B) {
	occ := NewOccupancy()
	occ.SetNodes(nodes(2500, 4))
	for i := range 9999 {
		slots, ok := occ.Place(Request{Trial: fmt.Sprint(i), GPUs: 1}, nil)
		if !ok {
			b.Fatalf("gang %d not placed", i)
		}
		occ.Hold(fmt.Sprint(i), slots)
	}
	for b.Loop() {
		slots, ok := occ.Place(Request{Trial: "next", GPUs: 1}, nil)
		if !ok {
			b.Fatal("the last free GPU not found")
		}
		occ.Hold("next", slots)
		occ.Release("next", slots)
	}
}
