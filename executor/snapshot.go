package executor

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// saveState writes the run's state beside its journal (cfg.Snapshot), at a sync: a driver that
// resumes the run then decodes and folds only the records after it. The state is encoded under
// mu (x.saved too is kept under it), with the journal's mark, so that the two agree; it is
// written after. A snapshot that cannot be written is said and the run goes on: the journal
// alone is the truth, and a resume without a snapshot replays it whole.
func (x *run) saveState() {
	if x.cfg.Snapshot == "" {
		return
	}
	x.mu.Lock()
	m := x.cfg.Journal.Mark()
	// Encoding a 100,000-trial state takes about half a second (its snapshot is 28 MB): one is
	// skipped while the journal has grown by less than a quarter of the last one's size since it,
	// so that brackets syncing together write one, and snapshots write at most four times what
	// the journal does; a resume then decodes at most that much more.
	if 4*(m.Size-x.saved.at) < x.saved.size {
		x.mu.Unlock()
		return
	}
	b, err := x.st.EncodeSnapshot(m)
	x.mu.Unlock()
	if err == nil {
		err = runstate.WriteSnapshot(x.cfg.Snapshot, b)
	}
	if err == nil {
		x.mu.Lock()
		x.saved.at, x.saved.size = m.Size, int64(len(b))
		x.mu.Unlock()
	}
	if err != nil {
		fmt.Fprintf(x.log, "%v (a resume replays the journal whole)\n", err)
	}
}
