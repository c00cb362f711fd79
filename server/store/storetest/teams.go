package storetest

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Teams are created, read back whole, listed by name and updated in quotas and budget only.
func testTeams(t *testing.T, open Open) {
	s := open(t)
	for _, n := range []string{"vision", "audio", "nlp"} {
		must(t, s.CreateTeam(ctx(t), team(n)))
	}
	got, err := s.Team(ctx(t), "audio")
	must(t, err)
	if want := team("audio"); !reflect.DeepEqual(got, want) {
		t.Fatalf("Team = %+v, want %+v", got, want)
	}
	ts, err := s.Teams(ctx(t))
	must(t, err)
	if len(ts) != 3 || ts[0].Name != "audio" || ts[1].Name != "nlp" || ts[2].Name != "vision" {
		t.Fatalf("Teams = %+v, want audio, nlp, vision", ts)
	}
	// By name is in byte order, whatever the database's collation: upper case first.
	must(t, s.CreateTeam(ctx(t), team("Zeta")))
	must(t, s.CreateTeam(ctx(t), team("_ops")))
	ts, err = s.Teams(ctx(t))
	must(t, err)
	if ts[0].Name != "Zeta" || ts[1].Name != "_ops" || ts[2].Name != "audio" {
		t.Fatalf("Teams = %+v, want Zeta, _ops, audio... (byte order)", ts)
	}
	up := store.Team{Name: "nlp", MaxGPUs: 64, MaxNodes: 0, MonthlyBudgetUSD: 2500.25, MaxQueuedRuns: 7,
		StoragePrefixes: []string{"s3://ckpts/nlp/", "file:///shared/nlp/"}, CreatedAt: t0().Add(time.Hour)}
	must(t, s.UpdateTeam(ctx(t), up))
	got, err = s.Team(ctx(t), "nlp")
	must(t, err)
	if got.MaxGPUs != 64 || got.MaxNodes != 0 || got.MonthlyBudgetUSD != 2500.25 || got.MaxQueuedRuns != 7 ||
		!reflect.DeepEqual(got.StoragePrefixes, up.StoragePrefixes) || !got.CreatedAt.Equal(t0()) {
		t.Fatalf("after UpdateTeam: %+v (CreatedAt must stay %v)", got, t0())
	}
	// A zero creation time is the store's clock.
	before := time.Now().Add(-time.Second)
	must(t, s.CreateTeam(ctx(t), store.Team{Name: "new"}))
	got, err = s.Team(ctx(t), "new")
	must(t, err)
	if got.CreatedAt.Before(before) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("zero CreatedAt stored as %v, want about now, in UTC", got.CreatedAt)
	}
}

func testTeamErrors(t *testing.T, open Open) {
	s := withTeams(t, open, "a")
	wantErr(t, s.CreateTeam(ctx(t), team("a")), store.ErrExists, "create team a: already exists")
	wantErr(t, s.UpdateTeam(ctx(t), team("b")), store.ErrNotFound, "update team b")
	_, err := s.Team(ctx(t), "b")
	wantErr(t, err, store.ErrNotFound, "team b")
	wantErr(t, s.CreateTeam(ctx(t), team("")), store.ErrInvalid, "empty team name")
	bad := team("c")
	bad.MaxGPUs = -1
	wantErr(t, s.CreateTeam(ctx(t), bad), store.ErrInvalid, "max GPUs")
	bad = team("c")
	bad.StoragePrefixes = []string{"s3://a/\ns3://b/"}
	wantErr(t, s.CreateTeam(ctx(t), bad), store.ErrInvalid, "storage prefix")
	if ts, err := s.Teams(ctx(t)); err != nil || len(ts) != 1 {
		t.Fatalf("failed creates left teams: %+v, %v", ts, err)
	}
}

// Users are found by name and by token hash, listed by name, and deleted.
func testUsers(t *testing.T, open Open) {
	s := withTeams(t, open, "vision", "audio")
	for _, u := range []store.User{user("carol", "audio"), user("alice", "vision"), user("bob", "vision")} {
		must(t, s.CreateUser(ctx(t), u))
	}
	admin := user("root", "vision")
	admin.Admin = true
	must(t, s.CreateUser(ctx(t), admin))

	got, err := s.UserByTokenHash(ctx(t), []byte("hash-of-bob"))
	must(t, err)
	if want := user("bob", "vision"); !reflect.DeepEqual(got, want) {
		t.Fatalf("UserByTokenHash = %+v, want %+v", got, want)
	}
	got, err = s.User(ctx(t), "root")
	must(t, err)
	if !got.Admin || got.Team != "vision" || !bytes.Equal(got.TokenHash, []byte("hash-of-root")) {
		t.Fatalf("User(root) = %+v", got)
	}
	us, err := s.Users(ctx(t))
	must(t, err)
	if len(us) != 4 || us[0].Name != "alice" || us[1].Name != "bob" || us[2].Name != "carol" || us[3].Name != "root" {
		t.Fatalf("Users = %+v, want alice, bob, carol, root", us)
	}
	must(t, s.DeleteUser(ctx(t), "bob"))
	_, err = s.User(ctx(t), "bob")
	wantErr(t, err, store.ErrNotFound, "user bob")
	_, err = s.UserByTokenHash(ctx(t), []byte("hash-of-bob"))
	wantErr(t, err, store.ErrNotFound, "not found")
	// The name and the token are free again.
	must(t, s.CreateUser(ctx(t), user("bob", "audio")))
}

func testUserErrors(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	must(t, s.CreateUser(ctx(t), user("alice", "vision")))
	wantErr(t, s.CreateUser(ctx(t), user("alice", "vision")), store.ErrExists, "create user alice: already exists")
	sameToken := user("eve", "vision")
	sameToken.TokenHash = []byte("hash-of-alice")
	wantErr(t, s.CreateUser(ctx(t), sameToken), store.ErrExists, "create user eve")
	wantErr(t, s.CreateUser(ctx(t), user("dan", "nope")), store.ErrNotFound, "create user dan")
	noToken := user("tom", "vision")
	noToken.TokenHash = nil
	wantErr(t, s.CreateUser(ctx(t), noToken), store.ErrInvalid, "token hash")
	wantErr(t, s.DeleteUser(ctx(t), "zed"), store.ErrNotFound, "delete user zed")
	_, err := s.UserByTokenHash(ctx(t), nil)
	wantErr(t, err, store.ErrNotFound, "not found")
	if us, err := s.Users(ctx(t)); err != nil || len(us) != 1 {
		t.Fatalf("failed creates left users: %+v, %v", us, err)
	}
}

func testDeleteUserKeepsRuns(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	must(t, s.CreateUser(ctx(t), user("alice", "vision")))
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	must(t, s.DeleteUser(ctx(t), "alice"))
	r, err := s.Run(ctx(t), "r1")
	must(t, err)
	if r.User != "alice" {
		t.Fatalf("run's user = %q after the user went, want alice", r.User)
	}
}
