package rundir

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// Follower keeps a run's view as its journal grows: each View reads what was appended since the
// last one (journal.Tail) and folds only that (Fold), so that a server answering many requests
// on a 100,000-trial run replays its million events once, not once a request.
type Follower struct {
	mu    sync.Mutex
	dir   string
	stamp string // what the run's folder held when st was loaded (Stale)
	st    *State
	tail  *journal.Tail
	fold  *Fold
	// found keeps the run's learning curves and results once Report or Best was asked for
	// (nil before): what they need of the whole journal, folded as it grows.
	found *foundFold
}

type foundFold struct {
	curves *CurveFold
	search *SearchFold
}

// FollowRun loads the run in dir to follow its journal.
func FollowRun(dir string) (*Follower, error) {
	stamp := folderStamp(dir)
	st, err := Open(dir)
	if err != nil {
		return nil, err
	}
	return &Follower{dir: dir, stamp: stamp, st: st, tail: journal.NewTail(filepath.Join(st.Dir, Journal), 16<<20)}, nil
}

// Stale says whether the run's folder changed what FollowRun loaded (its run.json, spec or plan:
// resume --spec, a mirror's copy of the folder): its follower is then made anew.
func (f *Follower) Stale() bool { return folderStamp(f.dir) != f.stamp }

// folderStamp is the size and time of the files Open loads.
func folderStamp(dir string) string {
	var s string
	for _, name := range []string{RunJSON, SpecCopy, PlanFile} {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", name, info.Size(), info.ModTime().UnixNano())
		}
	}
	return s
}

// View is the run as its journal says now: what NewView says, its Events left out (AllEvents
// reads them).
func (f *Follower) View() (*View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view()
}

func (f *Follower) view() (*View, error) {
	_, live, err := ReadHolder(f.st.Dir)
	if err != nil {
		return nil, err
	}
	if err := f.catchUp(); err != nil {
		return nil, err
	}
	return f.fold.View(live, nil), nil
}

// catchUp folds what the journal gained.
func (f *Follower) catchUp() error {
	for {
		before := f.tail.Line()
		more, err := f.tail.Next()
		if err != nil {
			return err
		}
		if f.fold == nil || f.tail.Line() < before+len(more) { // new, or the journal was cut back and is read anew
			if f.fold, err = NewFold(f.st); err != nil {
				return err
			}
			if f.found != nil {
				f.found = newFoundFold(f.st)
			}
		}
		f.fold.Apply(more...)
		if f.found != nil {
			for _, e := range more {
				f.found.curves.Apply(e)
				f.found.search.Apply(e)
			}
		}
		if len(more) == 0 {
			return nil
		}
	}
}

func newFoundFold(st *State) *foundFold {
	return &foundFold{curves: NewCurveFold(st.Exp), search: NewSearchFold(st.Exp)}
}

// withFound catches up with the journal, the curves and results folded too: the first call
// reads the journal again from its start to fold them, later ones what was appended. v is the
// run's result as of now (not a whole View: its snapshot is not needed).
func (f *Follower) withFound(now time.Time) (*View, *foundFold, error) {
	if f.found == nil {
		f.found = newFoundFold(f.st)
		f.fold, f.tail = nil, journal.NewTail(filepath.Join(f.st.Dir, Journal), 16<<20)
	}
	if err := f.catchUp(); err != nil {
		return nil, nil, err
	}
	return &View{State: f.st, Res: f.fold.result(now)}, f.found, nil
}

// Best is the run's winner as Best says it, of the journal as it is now.
func (f *Follower) Best() (*BestTrial, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, found, err := f.withFound(time.Now())
	if err != nil {
		return nil, err
	}
	return bestOf(v, found.curves)
}

// Report is the run as Replay says it as of now, of the journal as it is now, without its
// Events.
func (f *Follower) Report(now time.Time) (*Replayed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, found, err := f.withFound(now)
	if err != nil {
		return nil, err
	}
	if v.Res == nil {
		return nil, fmt.Errorf("replay: the journal holds no run")
	}
	return &Replayed{State: f.st, Res: v.Res, Search: found.search.Summary(v, found.curves)}, nil
}
