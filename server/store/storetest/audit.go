package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Audit lists newest first (ties: the later recorded first), by team, at most Limit (0: 100).
func testAudit(t *testing.T, open Open) {
	s := open(t)
	add := func(minute int, team, action string) {
		t.Helper()
		must(t, s.AddAudit(ctx(t), store.AuditEntry{At: t0().Add(time.Duration(minute) * time.Minute),
			User: "alice", Team: team, Action: action, Target: "r1", Detail: "gpus=4"}))
	}
	add(1, "vision", "submit")
	add(3, "audio", "submit")
	add(2, "vision", "cancel")
	add(3, "vision", "refuse") // same time as audio's submit, recorded later
	list := func(f store.AuditFilter) string {
		t.Helper()
		es, err := s.Audit(ctx(t), f)
		must(t, err)
		out := ""
		for _, e := range es {
			out += e.Team + "/" + e.Action + " "
		}
		return out
	}
	for _, c := range []struct {
		f    store.AuditFilter
		want string
	}{
		{store.AuditFilter{}, "vision/refuse audio/submit vision/cancel vision/submit "},
		{store.AuditFilter{Team: "vision"}, "vision/refuse vision/cancel vision/submit "},
		{store.AuditFilter{Team: "vision", Limit: 2}, "vision/refuse vision/cancel "},
		{store.AuditFilter{Limit: 1}, "vision/refuse "},
		{store.AuditFilter{Team: "nobody"}, ""},
	} {
		if got := list(c.f); got != c.want {
			t.Errorf("Audit(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
	es, err := s.Audit(ctx(t), store.AuditFilter{Limit: 1})
	must(t, err)
	e := es[0]
	if e.ID == 0 || !e.At.Equal(t0().Add(3*time.Minute)) || e.User != "alice" || e.Target != "r1" || e.Detail != "gpus=4" {
		t.Fatalf("entry came back %+v", e)
	}
	// IDs are the store's, increasing; a zero time is the store's clock; Limit 0 is 100.
	for i := range 110 {
		must(t, s.AddAudit(ctx(t), store.AuditEntry{User: "bob", Team: "ops", Action: fmt.Sprint("a", i)}))
	}
	es, err = s.Audit(ctx(t), store.AuditFilter{Team: "ops"})
	must(t, err)
	if len(es) != 100 || es[0].Action != "a109" || es[0].ID <= es[1].ID || time.Since(es[0].At).Abs() > time.Minute {
		t.Fatalf("Audit with no limit gave %d entries, first %+v", len(es), es[0])
	}
	wantErr(t, s.AddAudit(ctx(t), store.AuditEntry{User: "bob"}), store.ErrInvalid, "empty action")
}
