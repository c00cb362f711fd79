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
