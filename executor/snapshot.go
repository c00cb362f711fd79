package executor

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// saveState writes the run's state beside its journal (cfg.Snapshot), at a sync: a driver that
// resumes the run then decodes and folds only the records after it. The state is encoded under
// mu, with the journal's mark, so that the two agree; it is written after. A snapshot that cannot
// be written is said and the run goes on: the journal alone is the truth, and a resume without
// a snapshot replays it whole.
func (x *run) saveState() {
	if x.cfg.Snapshot == "" {
		return
	}
	x.mu.Lock()
	b, err := x.st.EncodeSnapshot(x.cfg.Journal.Mark())
	x.mu.Unlock()
	if err == nil {
		err = runstate.WriteSnapshot(x.cfg.Snapshot, b)
	}
	if err != nil {
		fmt.Fprintf(x.log, "%v (a resume replays the journal whole)\n", err)
	}
}
