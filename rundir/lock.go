package rundir

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
)

// Holder is who holds, or last held, a state directory's lock, as recorded in DIR/lock.
type Holder struct {
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	RunID string    `json:"run_id"`
	Since time.Time `json:"since"`
	// Released is when the holder let go of the lock; zero while it holds it, or if it died.
	Released time.Time `json:"released,omitzero"`
}

// DirLock is the lock on a state directory, held for a driver's life so that two drivers never
// write one journal. It is an advisory flock, which the kernel releases when the holder dies, so
// that a crashed driver never leaves a directory locked.
type DirLock struct {
	f      *os.File
	clk    clock.Clock
	holder Holder
	// Previous is the holder recorded by a driver that died holding the lock, nil if the lock was
	// free and released cleanly: so that the CLI can say whose lock it took over.
	Previous *Holder
}

// LockedError says that another live process holds a state directory's lock.
type LockedError struct {
	Dir   string
	PID   int
	Host  string
	RunID string
	Since time.Time
}

func (e *LockedError) Error() string {
	if e.PID == 0 { // the holder has not written its record yet
		return fmt.Sprintf("state directory %s is in use by another process; `rubberband cancel %s` stops it", e.Dir, e.Dir)
	}
	return fmt.Sprintf("state directory %s is in use by PID %d on host %s since %s (run %s); `rubberband cancel %s` stops it",
		e.Dir, e.PID, e.Host, e.Since.Format(time.RFC3339), e.RunID, e.Dir)
}

// lockTries is how often LockDir tries a lock that is taken, lockWait apart, so that a brief
// probe by ReadHolder is not taken for a driver.
const (
	lockTries = 5
	lockWait  = 20 * time.Millisecond
)

// LockDir takes the lock of state directory dir for run runID and records this process as its
// holder, since clk's now (nil: the wall clock). It fails with a *LockedError while another live
// process holds it.
func LockDir(dir, runID string, clk clock.Clock) (*DirLock, error) {
	clk = clock.Or(clk)
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	for try := 1; ; try++ {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || try == lockTries {
			break
		}
		clk.Sleep(context.Background(), lockWait)
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			h, _ := readHolder(f)
			return nil, &LockedError{Dir: dir, PID: h.PID, Host: h.Host, RunID: h.RunID, Since: h.Since}
		}
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	l := &DirLock{f: f, clk: clk}
	// A record left unreleased is that of a driver that died; a torn one tells nothing.
	if prev, err := readHolder(f); err == nil && prev.PID != 0 && prev.Released.IsZero() {
		l.Previous = &prev
	}
	host, err := os.Hostname()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state directory: %w", err)
	}
	l.holder = Holder{PID: os.Getpid(), Host: host, RunID: runID, Since: clk.Now().UTC()}
	if err := l.write(); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock state directory %s: %w", dir, err)
	}
	return l, nil
}

// Close records the lock as released, unlocks it and closes its file; the file stays, since
// removing it would race with a driver opening it.
func (l *DirLock) Close() error {
	l.holder.Released = l.clk.Now().UTC()
	err := l.write()
	if uerr := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN); err == nil && uerr != nil {
		err = uerr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unlock state directory: %w", err)
	}
	return nil
}

// write replaces the lock file's record with l's holder, synced.
func (l *DirLock) write() error {
	b, err := json.Marshal(l.holder)
	if err != nil {
		return fmt.Errorf("record holder: %w", err)
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("record holder: %w", err)
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("record holder: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("record holder: %w", err)
	}
	return nil
}

// ReadHolder returns who holds, or last held, the lock of state directory dir, and whether a
// live process holds it now: what `cancel` needs to know whom to stop. A directory never locked
// gives a zero Holder.
func ReadHolder(dir string) (h Holder, live bool, err error) {
	f, err := os.Open(filepath.Join(dir, "lock"))
	if errors.Is(err, fs.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("read lock holder: %w", err)
	}
	defer f.Close()
	// A shared lock is refused exactly while a driver holds the exclusive one; released at once.
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		live = true
	case err != nil:
		return Holder{}, false, fmt.Errorf("read lock holder: %w", err)
	default:
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	h, err = readHolder(f)
	if err != nil {
		return Holder{}, live, fmt.Errorf("read lock holder: %w", err)
	}
	return h, live, nil
}

// readHolder decodes the record in a lock file; an empty file gives a zero Holder.
func readHolder(f *os.File) (Holder, error) {
	var h Holder
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err != nil || len(b) == 0 {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Holder{}, fmt.Errorf("decode lock record: %w", err)
	}
	return h, nil
}
