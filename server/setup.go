package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
	"github.com/rubberband-hpo/rubberband/spec"
)

// FlagError is a flag value of `rubberband server` the user must change: the CLI exits 2 with
// its message.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

func flagErr(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// IsUserError says whether an admin command's err is the user's to fix: an unknown team, a
// name taken or malformed.
func IsUserError(err error) bool {
	var in *InputError
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrInvalid) || errors.As(err, &in)
}

// CheckLimits checks the bounds the server's flags set on what a client may hold of it; a bad
// one is a *FlagError naming its flag.
func CheckLimits(l HTTPLimits, maxStreams, maxStreamsPerUser int) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"read-header-timeout", l.ReadHeaderTimeout}, {"body-timeout", l.BodyTimeout}, {"idle-timeout", l.IdleTimeout}} {
		if f.d <= 0 {
			return flagErr("--%s %v: a positive duration", f.name, f.d)
		}
	}
	switch {
	case l.MaxConnsPerIP == 0 || l.MaxConnsPerIP < -1:
		return flagErr("--max-conns-per-ip %d: at least 1, or -1 for no bound", l.MaxConnsPerIP)
	case l.MaxConns == 0 || l.MaxConns < -1:
		return flagErr("--max-conns %d: at least 1, or -1 for no bound", l.MaxConns)
	case maxStreams < 1:
		return flagErr("--max-streams %d: at least 1", maxStreams)
	case maxStreamsPerUser < 1:
		return flagErr("--max-streams-per-user %d: at least 1", maxStreamsPerUser)
	}
	return nil
}

// CLIActor is who the audit log says acted for a command run on the database directly.
func CLIActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + name + "@" + host
}

// DBURL is the database db names, sqlite:ROOT/server.db when db is "" (its folder made); a
// SQLite path is made absolute, so that the server's drivers open the same file.
func DBURL(db, root string) (string, error) {
	if db == "" {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return "", err
		}
		db = "sqlite:" + filepath.Join(root, "server.db")
	}
	return sqlstore.AbsURL(db)
}

// OpenStore opens the database db names (DBURL), and says its URL.
func OpenStore(ctx context.Context, db, root string) (*sqlstore.Store, string, error) {
	url, err := DBURL(db, root)
	if err != nil {
		return nil, "", err
	}
	st, err := sqlstore.Open(ctx, url)
	return st, url, err
}

// SaveTeam adds the team name with ch's limits (create), or changes only the limits ch names
// of it.
func SaveTeam(ctx context.Context, st store.Store, name string, ch TeamChange, create bool, now time.Time, by string) (store.Team, error) {
	if !create {
		return UpdateTeam(ctx, st, name, ch, by)
	}
	t := ch.Apply(store.Team{Name: name, CreatedAt: now})
	return t, CreateTeam(ctx, st, t, by)
}

// Setup is how `rubberband server` makes its server, from its flags: Config's fields that the
// flags set directly are in Config; Start checks them and fills in the rest.
type Setup struct {
	Config
	// DB is --db ("" for sqlite:ROOT/server.db); Mirror is --mirror.
	DB, Mirror string
	// TLSCert and TLSKey serve HTTPS, both or neither.
	TLSCert, TLSKey string
	// Limits bound what a client may hold of the server.
	Limits HTTPLimits
	// PublicURL and AllowHosts are the host names the dashboard answers on (HostsOf).
	PublicURL  string
	AllowHosts []string
	// Catalog reads the command's instance catalog once the database is open.
	Catalog func() (spec.InstanceCatalog, error)
}

// Started is a server Start made, with what it says of itself when it starts.
type Started struct {
	*Server
	Store *sqlstore.Store
	// Kind is the backend's; Limits what Serve is to bound clients to.
	Kind   driver.Kind
	Limits HTTPLimits
	// Root is the runs' folder, absolute.
	Root string
	// Trainers says where the local backend's trainers run; Mirrored whether runs are mirrored.
	Trainers TrainerPlace
	Mirrored bool
}

// Close stops the server and closes its database.
func (s *Started) Close() {
	s.Server.Close()
	s.Store.Close()
}

// Start opens the database and makes the server that drives its runs from this binary's child
// processes; a flag value the user must change is a *FlagError.
func Start(ctx context.Context, s Setup) (*Started, error) {
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return nil, flagErr("--tls-cert and --tls-key go together")
	}
	if s.QueueLimits.PerTeam < 0 || s.QueueLimits.PerUser < 0 {
		return nil, flagErr("--max-queued-per-team and --max-queued-per-user must not be negative (0: no bound)")
	}
	kind, err := driver.Lookup(s.Backend)
	if err != nil {
		return nil, flagErr("--backend %q: %s", s.Backend, driver.Names(nil))
	}
	if err := CheckLimits(s.Limits, s.MaxStreams, s.MaxStreamsPerUser); err != nil {
		return nil, err
	}
	if s.Hosts, err = HostsOf(s.PublicURL, s.AllowHosts); err != nil {
		return nil, flagErr("--public-url, --allow-host: %v", err)
	}
	if s.Root, err = filepath.Abs(s.Root); err != nil {
		return nil, err
	}
	st, url, err := OpenStore(ctx, s.DB, s.Root)
	if err != nil {
		return nil, err
	}
	srv, err := start(ctx, s, kind, st, url)
	if err != nil {
		st.Close()
	}
	return srv, err
}

func start(ctx context.Context, s Setup, kind driver.Kind, st *sqlstore.Store, url string) (*Started, error) {
	cat, err := s.Catalog()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	wd, _ := os.Getwd()
	host, _ := os.Hostname()
	mirrored, err := MirrorFor(s.Mirror, url, st)
	if errors.Is(err, ErrMirrorFlag) {
		return nil, flagErr("--mirror: %v", err)
	} else if err != nil {
		return nil, err
	}
	if mirrored != nil && kind.Simulated {
		return nil, flagErr("--mirror: a %s run is not mirrored; use %s", s.Backend, driver.Names(func(k driver.Kind) bool { return !k.Simulated }))
	}
	trainers, err := PlaceTrainers(s.Backend, s.Root, s.SingleTenant)
	if err != nil {
		return nil, flagErr("--root: %v", err)
	}
	cfg := s.Config
	cfg.Store, cfg.Catalog, cfg.Sandbox = st, cat, trainers.Sandbox
	cfg.Holder = fmt.Sprintf("%s:%d:%x", host, os.Getpid(), time.Now().UnixNano()&0xffffff)
	cfg.Supervisor = &Supervisor{Binary: self, Dir: wd, Env: []string{"RUBBERBAND_BACKEND=" + s.Backend, "RUBBERBAND_ROOT=" + s.Root},
		Mirror: mirrored, Log: s.Log}
	srv := New(cfg)
	if err := srv.CheckTenancy(ctx); errors.Is(err, ErrUnsandboxed) {
		srv.Close()
		return nil, flagErr("%v (here %v)", err, trainers.WhyNot)
	} else if err != nil {
		srv.Close()
		return nil, err
	}
	return &Started{Server: srv, Store: st, Kind: kind, Limits: s.Limits, Root: s.Root, Trainers: trainers, Mirrored: mirrored != nil}, nil
}
