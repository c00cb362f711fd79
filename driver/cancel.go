package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// cancelReason is journaled with a cancel.
const cancelReason = "cancelled by `rubberband cancel`"

// Cancelled is what Cancel found: a run it cancelled (or that was cancelled already), or one
// that had finished, with nothing to cancel.
type Cancelled int

const (
	WasCancelled Cancelled = iota
	HadFinished
)

// Cancel stops the run in st for good: its gangs are stopped and every node it holds released,
// and the run is journaled cancelled (resume refuses it without --force). A live driver on this
// host is asked to stop (SIGTERM, with a cancel requested) and waited for, up to wait; it marks
// the run as it stops, and what it left undone is finished here. With no driver alive, the
// run's gangs are reaped and its nodes released here. A driver on another host is refused.
// What it does is said on log (nil: nowhere).
func Cancel(ctx context.Context, st *rundir.State, wait time.Duration, log io.Writer) (Cancelled, error) {
	if log == nil {
		log = io.Discard
	}
	holder, live, err := rundir.ReadHolder(st.Dir)
	if err != nil {
		return 0, err
	}
	if live {
		if err := stopDriver(st, holder, wait, log); err != nil {
			return 0, err
		}
	}
	return cancelStale(ctx, st, log)
}

// stopDriver asks the live driver holding the run's lock to stop, and waits for it.
func stopDriver(st *rundir.State, h rundir.Holder, wait time.Duration, log io.Writer) error {
	host, _ := os.Hostname()
	if h.Host != host {
		return fmt.Errorf("the run's driver is PID %d on host %s: cancel it there (this is %s)", h.PID, h.Host, host)
	}
	if h.PID <= 0 {
		return errors.New("the run's lock is held, but its holder is not recorded yet: try again")
	}
	if err := rundir.RequestCancel(st.Dir, time.Now()); err != nil {
		return err
	}
	if err := syscall.Kill(h.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal the driver (PID %d): %w", h.PID, err)
	}
	fmt.Fprintf(log, "rubberband: asked the driver (PID %d) to stop; waiting for it to release the run's nodes\n", h.PID)
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		if _, live, err := rundir.ReadHolder(st.Dir); err == nil && !live {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the driver (PID %d) is still running after %s", h.PID, wait)
		}
	}
}

// cancelStale cancels a run whose driver is gone: its gangs are ended and every node the journal
// and the provider know of is released.
func cancelStale(ctx context.Context, st *rundir.State, log io.Writer) (Cancelled, error) {
	lock, err := Lock(st.Dir, st.Run.RunID, log)
	if err != nil {
		return 0, err
	}
	defer lock.Close()
	events, err := journal.ReadJournal(filepath.Join(st.Dir, rundir.Journal))
	if err != nil {
		return 0, err
	}
	for _, e := range events {
		switch e.Ev {
		case journal.EvCancel:
			rundir.CancelDone(st.Dir)
			return WasCancelled, nil
		case journal.EvFinish:
			return HadFinished, nil
		}
	}
	if err := cancelHere(ctx, st, log); err != nil {
		return 0, err
	}
	return WasCancelled, nil
}

// cancelHere marks the run in st cancelled (executor.Cancel: its gangs ended, every node
// released and journaled); the caller holds the lock.
func cancelHere(ctx context.Context, st *rundir.State, log io.Writer) error {
	journal, past, err := journal.OpenJournal(filepath.Join(st.Dir, rundir.Journal))
	if err != nil {
		return err
	}
	defer journal.Close()
	backend, err := Open(ctx, st, log)
	if err != nil {
		return err
	}
	defer backend.Close()
	cfg := executor.ConfigFor(st.RunPlan())
	cfg.Provider, cfg.Runtime, cfg.Journal, cfg.Past, cfg.RunID, cfg.Log = backend.Provider, backend.Runtime, journal, past, st.Run.RunID, log
	if err := executor.Cancel(context.WithoutCancel(ctx), cfg, cancelReason); err != nil {
		return err
	}
	rundir.CancelDone(st.Dir)
	return nil
}
