package rundir

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
)

// ErrNoOutput says a log PrintLog was asked for has not been written yet.
var ErrNoOutput = errors.New("no output yet")

// PrintLog writes the log at path of the run in dir to w (`rubberband logs`): from its last tail
// lines (all when tail < 0), and with follow what is written to it until the run's driver stops,
// waiting for one not written yet. A log that is not there is ErrNoOutput.
func PrintLog(ctx context.Context, dir, path string, tail int, follow bool, w io.Writer) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && follow {
		f, err = OpenWhenWritten(ctx, dir, path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNoOutput
	}
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	if tail >= 0 {
		if err := SeekTail(f, tail); err != nil {
			return err
		}
	}
	if _, err := io.Copy(w, f); err != nil {
		return err
	}
	if follow {
		return Follow(ctx, dir, f, w)
	}
	return nil
}
