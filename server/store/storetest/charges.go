package storetest

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// ChargeRun charges what a run's cost grew by to its team's month, never a decrease.
func testChargeRun(t *testing.T, open Open) {
	s := withTeams(t, open, "vision", "audio")
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	must(t, s.CreateRun(ctx(t), run("r2", "vision", 1)))
	must(t, s.CreateRun(ctx(t), run("r3", "audio", 2)))
	for _, c := range []struct {
		id     string
		cost   float64
		month  string
		growth float64
	}{
		{"r1", 2.5, "2026-10", 2.5},
		{"r1", 4, "2026-11", 1.5}, // the month turned: the growth goes to the new one
		{"r1", 3, "2026-11", 0},   // a meter never runs back
		{"r1", 4, "2026-11", 0},   // nor charges twice
		{"r1", 4.25, "2026-11", 0.25},
		{"r2", 10, "2026-11", 10},
		{"r3", 7, "2026-11", 7},
		{"r3", -1, "2026-11", 0},
	} {
		g, err := s.ChargeRun(ctx(t), c.id, c.cost, c.month)
		must(t, err)
		if g != c.growth {
			t.Fatalf("ChargeRun(%s, %v, %s) = %v, want %v", c.id, c.cost, c.month, g, c.growth)
		}
	}
	for _, c := range []struct {
		team, month string
		want        float64
	}{
		{"vision", "2026-10", 2.5}, {"vision", "2026-11", 11.75}, {"audio", "2026-11", 7},
		{"audio", "2026-10", 0}, {"vision", "2026-12", 0}, {"nobody", "2026-11", 0},
	} {
		got, err := s.Spent(ctx(t), c.team, c.month)
		must(t, err)
		if got != c.want {
			t.Errorf("Spent(%s, %s) = %v, want %v", c.team, c.month, got, c.want)
		}
	}
	r, err := s.Run(ctx(t), "r1")
	must(t, err)
	if r.CostUSD != 4.25 {
		t.Fatalf("r1's cost %v, want 4.25", r.CostUSD)
	}
	_, err = s.ChargeRun(ctx(t), "r9", 1, "2026-11")
	wantErr(t, err, store.ErrNotFound, "charge run r9")
	_, err = s.ChargeRun(ctx(t), "r1", 9, "November")
	wantErr(t, err, store.ErrInvalid, "month")
	_, err = s.Spent(ctx(t), "vision", "2026-13")
	wantErr(t, err, store.ErrInvalid, "month")
	if got, _ := s.Spent(ctx(t), "vision", "2026-11"); got != 11.75 {
		t.Fatalf("failed charges changed spending to %v", got)
	}
}
