package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Times come back in UTC, to the microsecond, whatever zone they went in with.
func testTimes(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	tokyo := time.FixedZone("JST", 9*3600)
	r := run("r1", "vision", 0)
	r.SubmittedAt = time.Date(2026, 11, 3, 18, 0, 0, 999_999_999, tokyo)
	must(t, s.CreateRun(ctx(t), r))
	got, err := s.Run(ctx(t), "r1")
	must(t, err)
	want := time.Date(2026, 11, 3, 9, 0, 0, 999_999_000, time.UTC)
	if got.SubmittedAt != want {
		t.Fatalf("SubmittedAt came back %v (%s), want %v", got.SubmittedAt, got.SubmittedAt.Location(), want)
	}
}

// Closed and opened again, the store keeps everything and works as before.
func testReopen(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	must(t, s.CreateUser(ctx(t), user("alice", "vision")))
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	_, err := s.ChargeRun(ctx(t), "r1", 3, "2026-11")
	must(t, err)
	must(t, s.AddAudit(ctx(t), store.AuditEntry{At: t0(), User: "alice", Team: "vision", Action: "submit"}))
	ok, err := s.AcquireLease(ctx(t), "driver", "a", time.Minute, t0())
	must(t, err)
	if !ok {
		t.Fatal("lease not taken")
	}
	must(t, s.Close())

	for i := range 2 {
		s = open(t)
		if _, err := s.User(ctx(t), "alice"); err != nil {
			t.Fatalf("after reopening: %v", err)
		}
		r, err := s.Run(ctx(t), "r1")
		must(t, err)
		spent, err := s.Spent(ctx(t), "vision", "2026-11")
		must(t, err)
		es, err := s.Audit(ctx(t), store.AuditFilter{})
		must(t, err)
		holder, _, err := s.Lease(ctx(t), "driver")
		must(t, err)
		if r.CostUSD != 3 || spent != 3 || len(es) != 1 || holder != "a" {
			t.Fatalf("after reopening: cost %v, spent %v, %d audit entries, lease held by %q", r.CostUSD, spent, len(es), holder)
		}
		must(t, s.CreateTeam(ctx(t), team(fmt.Sprint("audio", i))))
		must(t, s.Close())
	}
}
