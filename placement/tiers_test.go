package placement

import (
	"slices"
	"testing"
)

// tiered is a hedged stage's nodes: n000-n001 on demand, n002-n005 spot, four GPUs each.
func tiered() ([]Node, map[string]bool) {
	ns := nodes(6, 4)
	return ns, map[string]bool{"n000": true, "n001": true}
}

// tierOf says on which tier each of a trial's slots is: "od", "spot" or "mixed".
func tierOf(p Placement, od map[string]bool, trial string) string {
	tier := ""
	for _, s := range p[trial] {
		t := "spot"
		if od[s.Node] {
			t = "od"
		}
		if tier != "" && tier != t {
			return "mixed"
		}
		tier = t
	}
	return tier
}

// The critical gangs go on the on-demand nodes, the others on spot, leaving the on-demand room
// they do not use free; a critical gang that does not fit on demand takes spot room.
func TestPlaceTieredCriticalOnDemand(t *testing.T) {
	ns, od := tiered()
	// Three 4-GPU trials, one critical; four 2-GPU trials, one critical.
	reqs := []Request{{"a", 4}, {"b", 4}, {"c", 4}, {"d", 2}, {"e", 2}, {"f", 2}, {"g", 2}}
	critical := map[string]bool{"a": true, "d": true}
	p, unplaced := PlaceTiered(ns, od, reqs, critical, nil)
	check(t, ns, reqs, p, unplaced)
	if len(unplaced) != 0 {
		t.Fatalf("unplaced %v", unplaced)
	}
	for _, r := range reqs {
		want := "spot"
		if critical[r.Trial] {
			want = "od"
		}
		if got := tierOf(p, od, r.Trial); got != want {
			t.Errorf("%s on %s, want %s", r.Trial, got, want)
		}
	}
	// Room left on demand: 2 GPUs (8 less a and d).
	if got, ok := MoveToOnDemand(ns, od, p, "e", 2); !ok || tierOf(got, od, "e") != "od" || tierOf(p, od, "e") != "spot" {
		t.Errorf("moving e: %v %v (p changed: %v)", got["e"], ok, tierOf(p, od, "e") != "spot")
	} else {
		check(t, ns, reqs, got, nil)
	}
	// Too many critical gangs for the on-demand tier: the one left over takes spot room.
	critical = map[string]bool{"a": true, "b": true, "c": true}
	p, unplaced = PlaceTiered(ns, od, reqs, critical, nil)
	check(t, ns, reqs, p, unplaced)
	var onOD []string
	for _, tr := range []string{"a", "b", "c"} {
		if tierOf(p, od, tr) == "od" {
			onOD = append(onOD, tr)
		}
	}
	if len(unplaced) != 0 || len(onOD) != 2 {
		t.Errorf("critical on demand %v, unplaced %v", onOD, unplaced)
	}
}

// An interrupted gang moves on demand only where there is free room for all of it (one node if
// it fits one, else whole nodes), displacing nobody.
func TestMoveToOnDemand(t *testing.T) {
	ns, od := tiered()
	reqs := []Request{{"a", 4}, {"b", 2}, {"c", 8}, {"d", 4}}
	p, unplaced := PlaceTiered(ns, od, reqs, map[string]bool{"a": true, "b": true}, nil)
	check(t, ns, reqs, p, unplaced)
	if _, ok := MoveToOnDemand(ns, od, p, "d", 4); ok {
		t.Error("a 4-GPU gang moved into 2 free GPUs")
	}
	if _, ok := MoveToOnDemand(ns, od, p, "c", 8); ok {
		t.Error("an 8-GPU gang moved into 2 free GPUs")
	}
	got, ok := MoveToOnDemand(ns, od, p, "d", 2) // d shrunk to 2 GPUs: fits
	if !ok || tierOf(got, od, "d") != "od" || !slices.Equal(got["a"][0].GPUs, p["a"][0].GPUs) {
		t.Errorf("moving d (2 GPUs): %v %v", got["d"], ok)
	}
	// With the critical gangs done (not in the placement), the whole tier is room: c moves.
	rest := Placement{"c": p["c"], "d": p["d"]}
	got, ok = MoveToOnDemand(ns, od, rest, "c", 8)
	if !ok || tierOf(got, od, "c") != "od" || len(got["c"]) != 2 {
		t.Errorf("moving c (8 GPUs) onto two free on-demand nodes: %v %v", got["c"], ok)
	}
}
