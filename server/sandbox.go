package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/internal/safefile"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// ErrUnsandboxed says the server would run one team's trainers where they reach the others' runs
// and the server's own files: the local backend, more than one team, no sandbox, and not
// started --single-tenant.
var ErrUnsandboxed = errors.New("trainers cannot be sandboxed")

// CheckTenancy says why this server may not run its teams' trainers: on the local backend
// without a sandbox (Config.Sandbox), more than one team must not share the server's user unless
// the server was told they trust each other (SingleTenant). The error wraps ErrUnsandboxed. It
// is asked at start and at every submission (a team may be added while the server runs).
func (s *Server) CheckTenancy(ctx context.Context) error {
	if !s.backend.LocalTrainers || s.cfg.Sandbox != nil || s.cfg.SingleTenant {
		return nil
	}
	teams, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return err
	}
	if len(teams) > 1 {
		return fmt.Errorf("%w: the %s backend would run %d teams' trainers as this server's own user, where they read its database, its environment and each other's runs; run the server as root (each run's trainers then get a uid of their own), use a remote backend, or start it --single-tenant if every team trusts every other", ErrUnsandboxed, s.cfg.Backend, len(teams))
	}
	return nil
}

// TrainerPlace is where a server's local trainers run: as a uid of their own per run (Sandbox,
// for Config.Sandbox), or as the server's own user; Where says which in words, and WhyNot why
// they cannot be sandboxed on the local backend (nil when they can, or need not be).
type TrainerPlace struct {
	Sandbox *process.SandboxRange
	Where   string
	WhyNot  error
}

// PlaceTrainers decides where the trainers of a server on backend run: sandboxed, a uid per run,
// when it is the local backend, the server may sandbox (process.CanSandbox) and is not
// singleTenant; root is then made and opened for the sandboxes to pass through (the error, when
// it cannot be: its parents closed to other users, say).
func PlaceTrainers(backend, root string, singleTenant bool) (TrainerPlace, error) {
	kind, _ := driver.Lookup(backend) // an unknown one's trainers are not this machine's
	switch whyNot := process.CanSandbox(); {
	case !kind.LocalTrainers:
		return TrainerPlace{Where: "run on the " + backend + " backend's nodes"}, nil
	case singleTenant:
		return TrainerPlace{Where: "run as this server's own user (--single-tenant)"}, nil
	case whyNot != nil:
		return TrainerPlace{Where: fmt.Sprintf("run as this server's own user (%v)", whyNot), WhyNot: whyNot}, nil
	}
	// With the database elsewhere nothing has made the root yet (a server's first start on a host).
	if err := os.MkdirAll(root, 0o700); err != nil {
		return TrainerPlace{}, err
	}
	if err := process.Reachable(root, root); err != nil {
		return TrainerPlace{}, err
	}
	rg := process.DefaultSandboxRange
	return TrainerPlace{Sandbox: &rg, Where: fmt.Sprintf("run sandboxed, a uid per run from %d", rg.First)}, nil
}

// sandboxFor gives the run about to be made in dir a sandbox of its own, when the server has
// them: a uid above every one this server's root (sandboxUIDFile) and the host's other servers
// (SandboxRange.Ledger) have handed out, which no active run of the store's (queued, running or
// paused: a paused run keeps its uid for its resume) nor a live process holds, and the folders
// from the root down to dir opened for it to pass through (0711; process.Reachable). A uid is never handed out twice: what one run's
// trainers leave on the host (a setuid copy of a shell in /tmp) must never act as another's.
func (s *Server) sandboxFor(ctx context.Context, dir string) (*process.Sandbox, error) {
	if !s.backend.LocalTrainers || s.cfg.Sandbox == nil {
		return nil, nil
	}
	if err := process.Reachable(s.cfg.Root, dir); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.sandboxMu.Lock()
	defer s.sandboxMu.Unlock()
	active, err := s.cfg.Store.Runs(ctx, store.RunFilter{States: []store.RunState{store.Queued, store.Running, store.Paused}})
	if err != nil {
		return nil, err
	}
	taken := map[int]bool{}
	for _, r := range active {
		if st, err := rundir.Open(r.Dir); err == nil && st.Run.Sandbox != nil {
			taken[st.Run.Sandbox.UID] = true
		}
	}
	last, err := s.lastSandboxUID()
	if err != nil {
		return nil, err
	}
	sb, err := s.cfg.Sandbox.Claim(last, taken)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.cfg.Root, sandboxUIDFile)
	if err := safefile.Write(path, []byte(strconv.Itoa(sb.UID)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("sandbox: keep the last uid handed out: %w", err)
	}
	return &sb, nil
}

// sandboxUIDFile, in the server's root, holds the last sandbox uid the server handed out.
const sandboxUIDFile = "sandbox-uid"

// lastSandboxUID is the last sandbox uid handed out under this root (0 before the first).
func (s *Server) lastSandboxUID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.cfg.Root, sandboxUIDFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sandbox: %w", err)
	}
	uid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("sandbox: %s: %w", sandboxUIDFile, err)
	}
	return uid, nil
}

// endSandbox kills every process of the sandbox of the run in dir, if it has one: before its
// driver starts (what an earlier driver's trainers left) and after it exits, whatever the reason
// (the run ended, was cancelled, failed, or its driver died). Before a start (starting) it also
// opens the folders down to dir for the sandbox to pass through: a run copied from the mirror
// was made on another server.
func (s *Supervisor) endSandbox(dir string, starting bool) {
	st, err := rundir.Open(dir)
	if err != nil || st.Run.Sandbox == nil {
		return
	}
	if err := st.Run.Sandbox.EndAll(); err != nil {
		fmt.Fprintf(s.logOr(), "server: %s: %v\n", filepath.Base(dir), err)
	}
	if starting {
		root := filepath.Dir(filepath.Dir(filepath.Dir(dir))) // ROOT/teams/TEAM/RUN: runDir's layout
		if err := process.Reachable(root, dir); err != nil {
			fmt.Fprintf(s.logOr(), "server: %s: sandbox: %v\n", filepath.Base(dir), err)
		}
	}
}
