package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/ui"
)

// Config is what a server serves and how it drives runs.
type Config struct {
	Store store.Store
	// Root holds the runs' state directories, one folder per team (ROOT/teams/TEAM/RUN): what
	// the dashboard and `rubberband list --root` read. Every server on one database shares it.
	Root string
	// Backend is where runs go: the name of one of driver.Kinds.
	Backend string
	// TimeScale is the emulated latencies' wall seconds per spec second (1; tests shorten it).
	TimeScale float64
	// Supervisor runs the drivers.
	Supervisor *Supervisor
	// Holder names this server in the lease (host:pid, say); two servers must differ.
	Holder string
	// LeaseTTL is how long the lease lasts unrenewed (15 s if 0): a stand-by server takes over
	// that long after the driving one died. Tick is how often the server renews it, starts
	// queued runs, acts on cancels and charges costs (LeaseTTL/5 if 0).
	LeaseTTL, Tick time.Duration
	// Catalog is the instance catalog specs are read with (the built-in one if nil).
	Catalog spec.InstanceCatalog
	// QueueLimits bound the runs a team and a user may have queued (zero: no bound; the CLI's
	// defaults are DefaultMaxQueuedPerTeam and DefaultMaxQueuedPerUser).
	QueueLimits QueueLimits
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	Log io.Writer
	// MaxStreams bounds the event and log streams open at once (DefaultMaxStreams if 0);
	// MaxStreamsPerUser bounds one user's (DefaultMaxStreamsPerUser if 0), so that no user
	// takes every slot.
	MaxStreams, MaxStreamsPerUser int
	// Hosts are the host names the server answers its dashboard and cookie-authenticated
	// writes on besides loopback names (HostsOf: the public URL's and any others, lower case).
	Hosts []string
	// Sandbox, on the local backend, is the uids the runs' trainers run as, one per run
	// (process.Sandbox); nil runs them as the server's own user, which only SingleTenant allows
	// once the server has more than one team (CheckTenancy).
	Sandbox *process.SandboxRange
	// SingleTenant says every team trusts every other and the server: the local backend may run
	// trainers unsandboxed (server --single-tenant).
	SingleTenant bool
}

// leaseName is the lease every server of one database competes for: its holder drives every run.
const leaseName = "drivers"

// Server is the API's HTTP handler and, while it holds the lease, every run's driver.
type Server struct {
	cfg Config
	// backend is cfg.Backend's kind: what it can do. An unknown name's is the zero Kind, which
	// can do nothing (Submit refuses it, through driver.Check).
	backend driver.Kind
	mux     *http.ServeMux
	wake    chan struct{}

	mu      sync.Mutex
	holding bool                 // this server holds the lease
	drivers map[string]*driving  // the runs this server drives, by ID
	starts  map[string]time.Time // queued runs' predicted starts, by ID
	// refreshed is when each run this server does not drive was last copied from the mirror.
	refreshed map[string]time.Time
	// streamsOpen counts the event and log streams open, streamsBy each user's.
	streamsOpen int
	streamsBy   map[string]int
	// elsewhere holds the running runs whose folders this server cannot see, said once each.
	elsewhere map[string]bool
	// dashboards are each team's dashboard, made on first use.
	dashboards map[string]*ui.Server
	// followed are the runs whose views the API answered lately, by folder (at most
	// maxFollowed): a request reads what their journals gained since, not the whole journal.
	followed map[string]*rundir.Follower

	// sandboxMu makes sandboxFor one at a time: two submissions never get one uid.
	sandboxMu sync.Mutex
}

// driving is one run this server drives.
type driving struct {
	cancel     context.CancelFunc
	cancelling bool
}

// New returns a server; Run drives, Handler serves.
func New(cfg Config) *Server {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.Tick <= 0 {
		cfg.Tick = cfg.LeaseTTL / 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Catalog == nil {
		cfg.Catalog = spec.BuiltinCatalog()
	}
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxStreamsPerUser <= 0 {
		cfg.MaxStreamsPerUser = DefaultMaxStreamsPerUser
	}
	if abs, err := filepath.Abs(cfg.Root); err == nil {
		cfg.Root = abs // CheckStorage compares absolute paths
	}
	s := &Server{cfg: cfg, wake: make(chan struct{}, 1), drivers: map[string]*driving{}, starts: map[string]time.Time{}, refreshed: map[string]time.Time{},
		streamsBy: map[string]int{}, elsewhere: map[string]bool{}, dashboards: map[string]*ui.Server{}, followed: map[string]*rundir.Follower{}}
	s.backend, _ = driver.Lookup(cfg.Backend)
	s.mux = http.NewServeMux()
	for _, r := range s.routes() {
		s.mux.HandleFunc(r.pattern, r.handle)
	}
	s.mux.HandleFunc("/", s.dashboard)
	return s
}

// Run holds or waits for the lease and, while it holds it, drives the runs, until ctx ends: then
// it stops its drivers (the runs go on under the next server) and gives the lease up.
func (s *Server) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	defer s.release()
	for {
		if err := s.step(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(s.cfg.Log, "server: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// poke makes Run step soon: a run was submitted, cancelled or ended.
func (s *Server) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// step renews the lease and, holding it, adopts the runs nobody drives, starts what the queue
// lets start, acts on cancels and charges what the runs cost.
func (s *Server) step(ctx context.Context) error {
	st := s.cfg.Store
	held, err := st.AcquireLease(ctx, leaseName, s.cfg.Holder, s.cfg.LeaseTTL, s.cfg.Now())
	if err != nil {
		return fmt.Errorf("renew the lease: %w", err)
	}
	s.mu.Lock()
	was := s.holding
	s.holding = held
	s.mu.Unlock()
	switch {
	case !held && was:
		fmt.Fprintf(s.cfg.Log, "server: lost the lease to another server: stopping this server's drivers\n")
		s.stopDrivers()
		return nil
	case !held:
		return nil
	case !was:
		fmt.Fprintf(s.cfg.Log, "server: %s holds the lease: driving the runs\n", s.cfg.Holder)
	}
	running, err := st.Runs(ctx, store.RunFilter{States: []store.RunState{store.Running}})
	if err != nil {
		return err
	}
	for _, r := range running {
		s.mu.Lock()
		d, driven := s.drivers[r.ID]
		s.mu.Unlock()
		if !driven {
			s.drive(ctx, r) // a run another server drove, or this one before a restart
			continue
		}
		if r.CancelRequested && !d.cancelling {
			s.cancelDriver(ctx, r, d)
		}
		s.charge(ctx, r)
	}
	return s.startQueued(ctx)
}

// startQueued decides, team by team under its lock (store.Decide), which queued runs start,
// which wait (for the budget, saying why in their message) and which leave the queue (those
// that can no longer fit a lowered quota or budget: ended with the reason, audited), and
// starts the drivers of those that start. It keeps the others' predicted starts.
func (s *Server) startQueued(ctx context.Context) error {
	st := s.cfg.Store
	queued, err := st.Runs(ctx, store.RunFilter{States: []store.RunState{store.Queued}})
	if err != nil {
		return err
	}
	var teams []string
	for _, r := range queued {
		if !slices.Contains(teams, r.Team) {
			teams = append(teams, r.Team)
		}
	}
	now := s.cfg.Now()
	predicted := map[string]time.Time{}
	for _, team := range teams {
		dec, err := st.Decide(ctx, team, month(now), func(l store.Ledger) (store.Decision, error) {
			v := Schedule(l, now)
			maps.Copy(predicted, v.Predicted)
			return store.Decision{Queued: v.changes(l, now)}, nil
		})
		if err != nil {
			return err
		}
		for _, r := range dec.Queued {
			switch {
			case r.State == store.Running:
				if err := s.storageMoved(ctx, r); err != nil {
					why := "refused at its start: " + err.Error()
					fmt.Fprintf(s.cfg.Log, "server: run %s of team %s: %s\n", r.ID, r.Team, why)
					s.recordFor(ctx, serverActor, r.Team, "refuse-queued", r.ID, why)
					s.ended(ctx, r, Ending{Status: "failed", Why: why})
					continue
				}
				s.drive(ctx, r)
			case r.State.Ended():
				fmt.Fprintf(s.cfg.Log, "server: run %s of team %s: %s\n", r.ID, r.Team, r.Message)
				s.recordFor(ctx, serverActor, r.Team, "refuse-queued", r.ID, r.Message)
			}
		}
	}
	s.mu.Lock()
	s.starts = predicted
	s.mu.Unlock()
	return nil
}

// serverActor is who the audit says acted when the server did, of its own accord.
const serverActor = "(server)"

// changes are the verdict's changes to the ledger's queued runs: those that start, those that
// leave the queue (cancelled, with why), and those whose reason to wait changed.
func (v Verdict) changes(l store.Ledger, now time.Time) []store.Run {
	var out []store.Run
	for _, r := range l.Active {
		if r.State != store.Queued {
			continue
		}
		switch why, refused := v.Refuse[r.ID]; {
		case slices.Contains(v.Start, r.ID):
			r.State, r.StartedAt, r.Message = store.Running, now, ""
		case refused:
			r.State, r.EndedAt, r.Message = store.Cancelled, now, why
		case r.Message != v.Wait[r.ID]:
			r.Message = v.Wait[r.ID]
		default:
			continue
		}
		out = append(out, r)
	}
	return out
}

// drive starts the run's supervised driver, unless its folder is not here.
func (s *Server) drive(ctx context.Context, r store.Run) {
	if s.notHere(ctx, r) {
		return
	}
	dctx, cancel := context.WithCancel(ctx)
	d := &driving{cancel: cancel}
	s.mu.Lock()
	s.drivers[r.ID] = d
	s.mu.Unlock()
	go func() {
		defer cancel()
		end, err := s.cfg.Supervisor.Drive(dctx, s.runDir(r.Team, r.ID), mirrorKey(r.Team, r.ID))
		// The run stays this driver's until its end is recorded: a step between would find it
		// running and undriven and start a second driver, whose start ends the sandbox's
		// processes (endSandbox), the trainers of the run's resume among them.
		defer func() {
			s.mu.Lock()
			if s.drivers[r.ID] == d {
				delete(s.drivers, r.ID)
			}
			s.mu.Unlock()
		}()
		if err != nil && dctx.Err() != nil {
			return // stopped: the next server to hold the lease drives it
		}
		if errors.Is(err, errMirror) { // not driven now: the next step tries again
			fmt.Fprintf(s.cfg.Log, "server: run %s: %v\n", r.ID, err)
			return
		}
		if err != nil { // its state directory cannot be read: no driver can go on with it
			end = Ending{Status: "failed", Why: err.Error()}
		}
		s.ended(context.WithoutCancel(ctx), r, end)
		s.poke()
	}()
}

// notHere says whether run r's folder is missing from this server's root with no mirror to
// restore it from: a stand-by whose --root is not the driving server's. No driver could go on
// with the run here, and ending it would fail a healthy run for good: the server says so, in its
// log and the run's message, once, and leaves the run to a server that sees its folder (the one
// that made it, when it holds the lease again). It looks again at each step: a shared disk
// mounted late is found.
func (s *Server) notHere(ctx context.Context, r store.Run) bool {
	if s.mirror() != nil {
		return false
	}
	dir := s.runDir(r.Team, r.ID)
	_, err := os.Stat(filepath.Join(dir, rundir.RunJSON))
	s.mu.Lock()
	said := s.elsewhere[r.ID]
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		delete(s.elsewhere, r.ID)
		s.mu.Unlock()
		if strings.HasPrefix(r.Message, notHereWhy) { // said by a server that could not see it
			s.cfg.Store.UpdateRun(context.WithoutCancel(ctx), r.ID, func(x *store.Run) error {
				if strings.HasPrefix(x.Message, notHereWhy) {
					x.Message = ""
				}
				return nil
			})
		}
		return false
	}
	s.elsewhere[r.ID] = true
	s.mu.Unlock()
	if said {
		return true
	}
	why := fmt.Sprintf(notHereWhy+"server %s holds the lease but cannot see this run's folder %s: its --root is not the one the run was made under, and it has no --mirror; the run is left running for a server that sees it (share --root between the servers, or give them --mirror)", s.cfg.Holder, dir)
	if _, err := s.cfg.Store.UpdateRun(context.WithoutCancel(ctx), r.ID, func(x *store.Run) error {
		if x.State == store.Running {
			x.Message = why
		}
		return nil
	}); err != nil {
		fmt.Fprintf(s.cfg.Log, "server: run %s: record why it is not driven: %v\n", r.ID, err)
	}
	fmt.Fprintf(s.cfg.Log, "server: run %s: %s\n", r.ID, why)
	return true
}

// notHereWhy begins the message of a run that the server holding the lease cannot see.
const notHereWhy = "not driven: "

// ended records how a run ended and charges its last cost.
func (s *Server) ended(ctx context.Context, r store.Run, end Ending) {
	state := store.Failed
	switch end.Status {
	case "finished":
		state = store.Finished
	case "cancelled":
		state = store.Cancelled
	case "paused": // an infrastructure fault, not the trainers': resumable (POST .../resume)
		state = store.Paused
	}
	msg := end.Why
	if end.Status == "over budget" {
		msg = "stopped over budget: " + end.Why
	}
	now := s.cfg.Now()
	if _, err := s.cfg.Store.ChargeRun(ctx, r.ID, end.CostUSD, month(now)); err != nil {
		fmt.Fprintf(s.cfg.Log, "server: run %s: charge: %v\n", r.ID, err)
	}
	if _, err := s.cfg.Store.UpdateRun(ctx, r.ID, func(r *store.Run) error {
		if r.Message != "" && state == store.Cancelled {
			msg = r.Message // why the server cancelled it (the team's budget)
		}
		r.State, r.EndedAt, r.Message = state, now, msg
		return nil
	}); err != nil {
		fmt.Fprintf(s.cfg.Log, "server: run %s: record its end: %v\n", r.ID, err)
	}
}

// cancelDriver stops a running run as `rubberband cancel` does: its driver journals the cancel,
// releases its nodes and exits; Drive then returns it cancelled.
func (s *Server) cancelDriver(ctx context.Context, r store.Run, d *driving) {
	s.mu.Lock()
	d.cancelling = true
	s.mu.Unlock()
	go func() {
		st, err := rundir.Open(s.runDir(r.Team, r.ID))
		if err == nil {
			_, err = driver.Cancel(ctx, st, time.Minute, s.cfg.Log)
		}
		if err != nil {
			fmt.Fprintf(s.cfg.Log, "server: cancel run %s: %v\n", r.ID, err)
			s.mu.Lock()
			d.cancelling = false // try again at the next step
			s.mu.Unlock()
		}
	}()
}

// charge records what a running run has cost so far against its team's month, and cancels it
// once its team's monthly budget is spent.
func (s *Server) charge(ctx context.Context, r store.Run) {
	cost, err := CostSoFar(s.runDir(r.Team, r.ID))
	if err != nil {
		return // its journal is being written: the next step reads it
	}
	now := s.cfg.Now()
	if _, err := s.cfg.Store.ChargeRun(ctx, r.ID, cost, month(now)); err != nil {
		fmt.Fprintf(s.cfg.Log, "server: run %s: charge: %v\n", r.ID, err)
		return
	}
	team, err := s.cfg.Store.Team(ctx, r.Team)
	if err != nil || team.MonthlyBudgetUSD <= 0 {
		return
	}
	spent, err := s.cfg.Store.Spent(ctx, r.Team, month(now))
	if err != nil || spent <= team.MonthlyBudgetUSD {
		return
	}
	why := fmt.Sprintf("team %s's monthly budget of %s is spent (%s charged this month)", team.Name, format.Money(team.MonthlyBudgetUSD), format.Money(spent))
	s.cfg.Store.UpdateRun(ctx, r.ID, func(r *store.Run) error {
		r.CancelRequested, r.Message = true, "cancelled: "+why
		return nil
	})
}

// stopDrivers stops every driver of this server without ending its run.
func (s *Server) stopDrivers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.drivers {
		d.cancel()
	}
}

// release stops the drivers and gives the lease up, so that a stand-by server takes over at once.
func (s *Server) release() {
	s.stopDrivers()
	for {
		s.mu.Lock()
		n := len(s.drivers)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.cfg.Store.ReleaseLease(context.Background(), leaseName, s.cfg.Holder)
}

// month is the budget month of t, UTC.
func month(t time.Time) string { return t.UTC().Format("2006-01") }

// runDir is where a run of team keeps its state.
func (s *Server) runDir(team, id string) string { return filepath.Join(s.cfg.Root, "teams", team, id) }

// newRunID is a run's ID: when it was submitted, and random bits.
func (s *Server) newRunID() string { return journal.NewRunID(s.cfg.Now(), rand.Uint32()) }
