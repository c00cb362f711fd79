package driver

import (
	"context"
	"io"
	"time"

	"github.com/rubberband-hpo/rubberband/rundir"
)

// CancelWait is how long `rubberband cancel` waits, by default, for a live driver to stop.
const CancelWait = 2 * time.Minute

// CancelDir does what `rubberband cancel DIR` does, quietly: the dashboard's cancel button.
func CancelDir(ctx context.Context, dir string) error {
	st, err := rundir.Open(dir)
	if err != nil {
		return err
	}
	_, err = Cancel(ctx, st, CancelWait, io.Discard)
	return err
}

// Said is what `rubberband cancel` says of the run in dir that Cancel found so.
func (c Cancelled) Said(dir string) string {
	if c == HadFinished {
		return dir + " had finished: nothing to cancel"
	}
	return dir + " is cancelled"
}
