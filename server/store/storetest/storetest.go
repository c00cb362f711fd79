package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Open opens the store of test t. Its first call in a test gives an empty store on a database
// of the test's own; each later call in the same test opens that same database again, as a
// second server would, or the first after a restart. It closes what it opened when the test
// ends; the suite may have closed it already (Close twice must be harmless).
type Open func(t *testing.T) store.Store

// RunStoreTests runs the contract suite, each case as a subtest with a database of its own.
// Nothing waits on the wall clock: leases are given their times.
func RunStoreTests(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Open)
	}{
		{"Teams", testTeams},
		{"TeamErrors", testTeamErrors},
		{"Users", testUsers},
		{"UserErrors", testUserErrors},
		{"DeleteUserKeepsRuns", testDeleteUserKeepsRuns},
		{"RunRoundTrip", testRunRoundTrip},
		{"RunErrors", testRunErrors},
		{"RunsOrderAndFilters", testRunsOrderAndFilters},
		{"UpdateRun", testUpdateRun},
		{"UpdateRunAborts", testUpdateRunAborts},
		{"UpdateRunConcurrent", testUpdateRunConcurrent},
		{"TwoStoresConcurrentWriters", testTwoStores},
		{"ChargeRun", testChargeRun},
		{"ChargeRunConcurrent", testChargeRunConcurrent},
		{"DecideConcurrent", testDecideConcurrent},
		{"DecideDequeue", testDecideDequeue},
		{"Audit", testAudit},
		{"Leases", testLeases},
		{"Bounds", testBounds},
		{"Times", testTimes},
		{"Reopen", testReopen},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, open) })
	}
}

// t0 is the suite's epoch: times are given, never read from a clock.
func t0() time.Time { return time.Date(2026, 11, 3, 9, 30, 0, 123456000, time.UTC) }

func ctx(t *testing.T) context.Context { return t.Context() }

// wantErr fails unless err is target (errors.Is) and its text says what was being done.
func wantErr(t *testing.T, err, target error, says string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
	if !strings.Contains(err.Error(), says) {
		t.Fatalf("error %q does not say %q", err, says)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func team(name string) store.Team {
	return store.Team{Name: name, MaxGPUs: 8, MaxNodes: 2, MonthlyBudgetUSD: 1000, CreatedAt: t0()}
}

func user(name, team string) store.User {
	return store.User{Name: name, Team: team, TokenHash: []byte("hash-of-" + name), CreatedAt: t0()}
}

// run is a queued run of team submitted at t0 plus minutes.
func run(id, team string, minutes int) store.Run {
	return store.Run{ID: id, Team: team, User: "alice", Name: "exp-" + id, State: store.Queued,
		SubmittedAt: t0().Add(time.Duration(minutes) * time.Minute), Spec: []byte("name: " + id + "\n"),
		Plan: []byte(`{"trials":4}`), PredictedCostUSD: 12.5, PredictedJCTSeconds: 3600, GPUs: 4, Nodes: 1,
		Dir: "/srv/rb/runs/" + id}
}

// withTeams opens a store holding the named teams.
func withTeams(t *testing.T, open Open, names ...string) store.Store {
	t.Helper()
	s := open(t)
	for _, n := range names {
		must(t, s.CreateTeam(ctx(t), team(n)))
	}
	return s
}

func ids(rs []store.Run) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return strings.Join(out, ",")
}
