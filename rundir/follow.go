package rundir

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
	_, live, err := ReadHolder(f.st.Dir)
	if err != nil {
		return nil, err
	}
	for {
		before := f.tail.Line()
		more, err := f.tail.Next()
		if err != nil {
			return nil, err
		}
		if f.fold == nil || f.tail.Line() < before+len(more) { // new, or the journal was cut back and is read anew
			if f.fold, err = NewFold(f.st); err != nil {
				return nil, err
			}
		}
		f.fold.Apply(more...)
		if len(more) == 0 {
			break
		}
	}
	return f.fold.View(live, nil), nil
}
