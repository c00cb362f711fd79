package rundir

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// TrialLog is the log file of a trial the journal's events name; its error matches ErrNoTrial
// and names some trials that exist. An ID that could leave the logs folder is no trial's.
func TrialLog(dir string, events []journal.Event, id string) (string, error) {
	trials := map[string]bool{}
	for _, e := range events {
		if e.Ev == journal.EvTrial {
			trials[e.Trial] = true
		}
	}
	return TrialLogIn(dir, trials, id)
}

// TrialLogIn is TrialLog of a run whose trials (those its journal declares) are known already:
// a reader that follows the journal keeps their IDs, not its events.
func TrialLogIn(dir string, trials map[string]bool, id string) (string, error) {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return "", userErr(ErrNoTrial, "%q is not a trial ID", id)
	}
	if trials[id] {
		return filepath.Join(dir, LogsDir, id+".log"), nil
	}
	ids := slices.Sorted(maps.Keys(trials))
	if len(ids) > 5 {
		ids = append(ids[:5], "…")
	}
	return "", userErr(ErrNoTrial, "the run has no trial %q (its trials: %s)", id, strings.Join(ids, ", "))
}

// TrialLogOf is TrialLog of the run in dir, from its journal as far as it is written (none
// yet: no trial is named).
func TrialLogOf(dir, id string) (string, error) {
	events, err := journal.ReadJournal(filepath.Join(dir, Journal))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return TrialLog(dir, events, id)
}

// SeekTail positions f at the start of its last n lines: just after the n-th newline before the
// file's final one, reading backwards in chunks so that a long log is not read whole.
func SeekTail(f *os.File, n int) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	end := info.Size()
	if n == 0 {
		_, err := f.Seek(end, io.SeekStart)
		return err
	}
	pos := end
	if last := make([]byte, 1); end > 0 {
		if _, err := f.ReadAt(last, end-1); err == nil && last[0] == '\n' {
			pos--
		}
	}
	const chunk = 64 << 10
	for pos > 0 {
		start := max(0, pos-chunk)
		buf := make([]byte, pos-start)
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return err
		}
		for i := len(buf) - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				if n--; n == 0 {
					_, err := f.Seek(start+int64(i)+1, io.SeekStart)
					return err
				}
			}
		}
		pos = start
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// Follow copies to w what is appended to f, from where it stands, until the run's driver in
// dir stops (and what it wrote last is out) or ctx ends.
func Follow(ctx context.Context, dir string, f *os.File, w io.Writer) error {
	r := bufio.NewReader(f)
	for {
		_, live, err := ReadHolder(dir)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, r); err != nil {
			return err
		}
		if !live {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// OpenWhenWritten opens the file at path, waiting for it while the run's driver in dir lives
// and ctx goes on: a log that is not written yet. It returns fs.ErrNotExist when the driver
// stopped without writing it, and nil, nil when ctx ended.
func OpenWhenWritten(ctx context.Context, dir, path string) (*os.File, error) {
	for {
		f, err := os.Open(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
		if _, live, herr := ReadHolder(dir); herr != nil || !live {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TrialLog is TrialLog of the view's run, told by its trials (the journal's declared trials
// are its result's) rather than by its events: a followed view keeps none.
func (v *View) TrialLog(id string) (string, error) {
	if v.Res == nil {
		events, err := v.AllEvents()
		if err != nil {
			return "", err
		}
		return TrialLog(v.State.Dir, events, id)
	}
	trials := make(map[string]bool, len(v.Res.Trials))
	for _, t := range v.Res.Trials {
		trials[t.ID] = true
	}
	return TrialLogIn(v.State.Dir, trials, id)
}
