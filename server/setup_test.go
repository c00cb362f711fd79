package server

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A bad bound names its flag, in the order the flags are listed, as a *FlagError.
func TestCheckLimitsNamesTheFlag(t *testing.T) {
	t.Parallel()
	good := HTTPLimits{ReadHeaderTimeout: time.Second, BodyTimeout: time.Second, IdleTimeout: time.Second, MaxConnsPerIP: -1, MaxConns: 5}
	if err := CheckLimits(good, 1, 1); err != nil {
		t.Fatalf("good limits: %v", err)
	}
	bad := good
	bad.BodyTimeout, bad.IdleTimeout = 0, -time.Second
	for _, tc := range []struct {
		l             HTTPLimits
		streams, user int
		want          string
	}{
		{bad, 1, 1, "--body-timeout 0s: a positive duration"},
		{HTTPLimits{ReadHeaderTimeout: time.Second, BodyTimeout: time.Second, IdleTimeout: time.Second, MaxConnsPerIP: -2, MaxConns: 1}, 1, 1, "--max-conns-per-ip -2"},
		{HTTPLimits{ReadHeaderTimeout: time.Second, BodyTimeout: time.Second, IdleTimeout: time.Second, MaxConnsPerIP: 1, MaxConns: 0}, 1, 1, "--max-conns 0"},
		{good, 0, 1, "--max-streams 0"},
		{good, 1, 0, "--max-streams-per-user 0"},
	} {
		err := CheckLimits(tc.l, tc.streams, tc.user)
		var fe *FlagError
		if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v %d %d: %v, want a FlagError %q", tc.l, tc.streams, tc.user, err, tc.want)
		}
	}
}

// The default database is ROOT/server.db, its folder made and its path absolute.
func TestDBURLDefaultsUnderRoot(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "new")
	url, err := DBURL("", root)
	if err != nil || url != "sqlite:"+filepath.Join(root, "server.db") {
		t.Fatalf("DBURL: %q, %v", url, err)
	}
	if url, err := DBURL("postgres://u@h/db", root); err != nil || url != "postgres://u@h/db" {
		t.Fatalf("a postgres URL: %q, %v", url, err)
	}
}

// SaveTeam adds a team with the limits given, then changes only those named; an unknown team is
// the user's error.
func TestSaveTeamAddsThenChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _, err := OpenStore(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gpus, nodes := 8, 2
	if _, err := SaveTeam(ctx, st, "ml", TeamChange{MaxGPUs: &gpus}, true, time.Unix(0, 0), "test"); err != nil {
		t.Fatal(err)
	}
	team, err := SaveTeam(ctx, st, "ml", TeamChange{MaxNodes: &nodes}, false, time.Unix(0, 0), "test")
	if err != nil || team.MaxGPUs != 8 || team.MaxNodes != 2 {
		t.Fatalf("changed team: %+v, %v", team, err)
	}
	if _, err := SaveTeam(ctx, st, "nobody", TeamChange{MaxNodes: &nodes}, false, time.Unix(0, 0), "test"); !IsUserError(err) {
		t.Fatalf("an unknown team: %v, want the user's error", err)
	}
	if _, err := SaveTeam(ctx, st, "ml", TeamChange{}, true, time.Unix(0, 0), "test"); !IsUserError(err) || !errors.Is(err, store.ErrExists) {
		t.Fatalf("a team added twice: %v, want the user's error", err)
	}
	if IsUserError(errors.New("disk full")) {
		t.Fatal("any error is the user's")
	}
}

// A flag the server cannot start with (a --mirror that names nothing, or one a simulated backend
// cannot have, a TLS key without its certificate, ...) is a FlagError.
func TestStartRefusesABadMirror(t *testing.T) {
	t.Parallel()
	limits := HTTPLimits{ReadHeaderTimeout: time.Second, BodyTimeout: time.Second, IdleTimeout: time.Second, MaxConnsPerIP: 1, MaxConns: 1}
	builtin := func() (spec.InstanceCatalog, error) { return spec.BuiltinCatalog(), nil }
	for _, mirror := range []string{"nfs", "dir:"} {
		_, err := Start(context.Background(), Setup{Config: Config{Root: t.TempDir(), Backend: "local", MaxStreams: 1, MaxStreamsPerUser: 1}, Limits: limits, Mirror: mirror, Catalog: builtin})
		var fe *FlagError
		if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), "--mirror: ") {
			t.Errorf("--mirror %q: %v, want a FlagError", mirror, err)
		}
	}
	for _, tc := range []struct {
		setup Setup
		want  string
	}{
		{Setup{Config: Config{Backend: driver.Virtual}, Mirror: "db"}, "--mirror: a virtual run is not mirrored"},
		{Setup{Config: Config{Backend: "local"}, TLSCert: "cert.pem"}, "--tls-cert and --tls-key go together"},
		{Setup{Config: Config{Backend: "local", QueueLimits: QueueLimits{PerUser: -1}}}, "--max-queued-per-team and --max-queued-per-user"},
		{Setup{Config: Config{Backend: "gce"}}, `--backend "gce"`},
		{Setup{Config: Config{Backend: "local", MaxStreams: 0, MaxStreamsPerUser: 1}}, "--max-streams 0"},
		{Setup{Config: Config{Backend: "local"}, PublicURL: "::bad"}, "--public-url, --allow-host: "},
	} {
		tc.setup.Root, tc.setup.Catalog, tc.setup.Limits = t.TempDir(), builtin, limits
		if tc.setup.MaxStreams == 0 && !strings.HasPrefix(tc.want, "--max-streams") {
			tc.setup.MaxStreams, tc.setup.MaxStreamsPerUser = 1, 1
		}
		_, err := Start(context.Background(), tc.setup)
		var fe *FlagError
		if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a FlagError %q", tc.setup, err, tc.want)
		}
	}
}
