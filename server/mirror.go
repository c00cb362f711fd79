package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
)

// Mirror is where a server copies its runs' state directories so that they outlive the machine:
// any server on the same database resumes them from there (rundir/mirror).
type Mirror struct {
	Store mirror.Store
	// At is where the drivers open Store (their mirror.EnvAt: mirror.Open).
	At string
	// Push is how often what a driver wrote besides its journal is copied (1 s if 0).
	Push time.Duration
}

// refreshEvery bounds how often a server that does not drive a run copies it from the mirror to
// answer a request.
const refreshEvery = time.Second

// mirrorKey is a run's key in the mirror: its folder under the root.
func mirrorKey(team, id string) string { return "teams/" + team + "/" + id }

// dirOf is where this server reads run: its folder under the root, first brought up to date from
// the mirror (at most once a second) when another server drives it.
func (s *Server) dirOf(ctx context.Context, run store.Run) string {
	dir := s.runDir(run.Team, run.ID)
	m := s.mirror()
	if m == nil {
		return dir
	}
	s.mu.Lock()
	_, driven := s.drivers[run.ID]
	last := s.refreshed[run.ID]
	now := time.Now()
	fresh := driven || now.Sub(last) < refreshEvery
	if !fresh {
		s.refreshed[run.ID] = now
	}
	s.mu.Unlock()
	if !fresh {
		if _, err := mirror.Restore(ctx, m.Store, mirrorKey(run.Team, run.ID), dir, rundir.MirrorLayout(), now); err != nil {
			fmt.Fprintf(s.cfg.Log, "server: run %s: read the mirror: %v\n", run.ID, err)
		}
	}
	return dir
}

// pushNew copies a new run's folder to the mirror before the run is recorded: a server that
// dies next leaves a run any other can start.
func (s *Server) pushNew(ctx context.Context, team, id string) error {
	m := s.mirror()
	if m == nil {
		return nil
	}
	p := &mirror.Pusher{Store: m.Store, Run: mirrorKey(team, id), Dir: s.runDir(team, id), Layout: rundir.MirrorLayout()}
	if err := p.Push(ctx); err != nil {
		return fmt.Errorf("copy run %s to the mirror: %w", id, err)
	}
	return nil
}

// restore brings a run's folder here up to date before this server drives it, and says what
// it did that matters.
func (s *Supervisor) restore(ctx context.Context, dir, key string) error {
	notes, err := mirror.Restore(ctx, s.Mirror.Store, key, dir, rundir.MirrorLayout(), time.Now())
	for _, n := range notes {
		fmt.Fprintf(s.logOr(), "server: %s: %s\n", dir, n)
	}
	if err != nil {
		return fmt.Errorf("restore %s from the mirror: %w: %w", key, errMirror, err)
	}
	return nil
}

// errMirror: the mirror could not be read; the run is not driven now, and tried again.
var errMirror = errors.New("the mirror failed")

// pushing copies what the driver in dir writes besides its journal until stop closes, then
// once more, and closes done.
func (s *Supervisor) pushing(dir, key string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	every := s.Mirror.Push
	if every <= 0 {
		every = time.Second
	}
	p := &mirror.Pusher{Store: s.Mirror.Store, Run: key, Dir: dir, Layout: rundir.MirrorLayout()}
	tick := time.NewTicker(every)
	defer tick.Stop()
	ctx := context.Background()
	for {
		select {
		case <-stop:
			if err := p.Push(ctx); err != nil {
				fmt.Fprintf(s.logOr(), "server: %s: copy to the mirror: %v\n", filepath.Base(dir), err)
			}
			return
		case <-tick.C:
			if err := p.Push(ctx); err != nil {
				fmt.Fprintf(s.logOr(), "server: %s: copy to the mirror (tried again in %s): %v\n", filepath.Base(dir), every, err)
			}
		}
	}
}

// mirror is the server's mirror, nil without one.
func (s *Server) mirror() *Mirror {
	if s.cfg.Supervisor == nil {
		return nil
	}
	return s.cfg.Supervisor.Mirror
}

// ErrMirrorFlag: a --mirror that is neither db nor dir:PATH.
var ErrMirrorFlag = errors.New("db (the server's database) or dir:PATH")

// MirrorFor is the mirror a server's --mirror names (nil for ""): "db", the database st opened
// at dbURL, or "dir:PATH", a folder (made absolute, for its drivers).
func MirrorFor(flag, dbURL string, st *sqlstore.Store) (*Mirror, error) {
	switch dir, isDir := strings.CutPrefix(flag, "dir:"); {
	case flag == "":
		return nil, nil
	case flag == "db":
		return &Mirror{Store: st.RunFiles(), At: dbURL}, nil
	case isDir && dir != "":
		abs, err := filepath.Abs(dir)
		return &Mirror{Store: &mirror.Dir{Root: abs}, At: "dir:" + abs}, err
	default:
		return nil, fmt.Errorf("%q: %w", flag, ErrMirrorFlag)
	}
}
