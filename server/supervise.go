package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
)

// Supervisor runs one run's driver as a child process of the CLI (`rubberband resume DIR`: the
// server has made the state directory as `run` would) and restarts it, resumed from its journal,
// when it dies without ending the run. A child dies with the server (the parent-death signal):
// the server that next holds the lease resumes the run, so that two drivers never drive one.
type Supervisor struct {
	// Binary is the CLI the drivers run; Dir the directory they run in (a spec's relative paths,
	// a trainer's command, are resolved from it).
	Binary, Dir string
	// Env is added to the drivers' environment (the backend's settings).
	Env []string
	// MaxRestarts bounds the restarts of one run's driver after it died (3 if 0); Backoff is the
	// pause before the first, doubling after each (1 s if 0).
	MaxRestarts int
	Backoff     time.Duration
	// Mirror, when set, is where the runs' folders are copied (journals at each sync, by the
	// drivers; the rest by Drive): a run this Supervisor drives is first restored from it.
	Mirror *Mirror
	Log    io.Writer
}

// Ending is how a run's driver ended it.
type Ending struct {
	// Status is rundir's word for the run: finished, cancelled, failed, over budget, paused (an
	// infrastructure fault: a full disk, a store down; not restarted here, a resume queues it
	// again), or interrupted (the drivers died more often than MaxRestarts allows); Why says why.
	Status, Why string
	CostUSD     float64
}

// Drive drives the run in dir (key in the mirror) until it ends, and returns how. Once ctx ends
// (the server loses its lease, or stops) the driver is killed at once and Drive returns ctx's
// error: the run goes on from its journal under the next server.
func (s *Supervisor) Drive(ctx context.Context, dir, key string) (Ending, error) {
	if s.Mirror != nil {
		if err := s.restore(ctx, dir, key); err != nil {
			return Ending{}, err
		}
	}
	restarts, backoff := 0, s.Backoff
	if backoff <= 0 {
		backoff = time.Second
	}
	maxRestarts := s.MaxRestarts
	if maxRestarts <= 0 {
		maxRestarts = 3
	}
	for {
		exitErr := s.runOnce(ctx, dir, key)
		if ctx.Err() != nil {
			return Ending{}, ctx.Err()
		}
		end, err := s.settled(ctx, dir)
		if err != nil {
			return Ending{}, err
		}
		if ee := (*exec.ExitError)(nil); errors.As(exitErr, &ee) && ee.ExitCode() == driver.ExitPaused && end.Status != "paused" {
			// Paused on a journal that cannot be written: the journal could not say so, its
			// driver did (its last line). Restarting would meet the same fault.
			end.Status, end.Why = "paused", lastLine(exitErr)
		}
		if end.Status != "interrupted" && end.Status != "not started" {
			return end, nil
		}
		if restarts >= maxRestarts {
			end.Status, end.Why = "interrupted", fmt.Sprintf("its driver died %d times (the last: %v); see %s", restarts+1, exitErr, filepath.Join(dir, rundir.DriverLog))
			return end, nil
		}
		restarts++
		fmt.Fprintf(s.logOr(), "server: %s: the driver ended the run %s (%v); resuming it from its journal (restart %d of %d)\n", dir, end.Status, exitErr, restarts, maxRestarts)
		select {
		case <-ctx.Done():
			return Ending{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}

// runOnce runs one driver until it exits or ctx ends (then it is killed). The parent-death
// signal fires when the thread that started the child ends, not the process: the goroutine keeps
// its thread until the child is gone.
func (s *Supervisor) runOnce(ctx context.Context, dir, key string) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s.endSandbox(dir, true)
	defer s.endSandbox(dir, false)
	cmd := exec.Command(s.Binary, "resume", dir)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	if s.Mirror != nil {
		cmd.Env = append(cmd.Env, mirror.EnvAt+"="+s.Mirror.At, mirror.EnvRun+"="+key)
		stop, done := make(chan struct{}), make(chan struct{})
		go s.pushing(dir, key, stop, done)
		defer func() { close(stop); <-done }() // the driver's last lines, its report
	}
	// The driver log in dir has it all, but for a journal or disk that fails: the end of
	// standard error says why then.
	tail := &tailWriter{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = io.Discard, tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the driver: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return &driverExit{err: err, stderr: tail.String()}
		}
		return nil
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
}

// settled is where the run in dir stands once no process holds it. After its driver exits,
// another may hold it a moment: a cancel that stopped the driver takes the run's lock to end
// what is left (driver.Cancel), and the run reads as running until it lets go. Ending the run
// then would call a cancelled run failed.
func (s *Supervisor) settled(ctx context.Context, dir string) (Ending, error) {
	for {
		end, err := endingOf(dir)
		if err != nil || (end.Status != "running" && end.Status != "starting") {
			return end, err
		}
		select {
		case <-ctx.Done():
			return Ending{}, ctx.Err()
		case <-time.After(100 * time.Millisecond): // another process's lock: nothing to block on
		}
	}
}

// endingOf reads where the run in dir stands.
func endingOf(dir string) (Ending, error) {
	st, err := rundir.Open(dir)
	if err != nil {
		return Ending{}, err
	}
	v, err := rundir.NewView(st)
	if err != nil {
		return Ending{}, err
	}
	sum := v.Summary()
	return Ending{Status: sum.Status, Why: sum.Why, CostUSD: sum.CostUSD}, nil
}

// CostSoFar is what the run in dir has cost so far, as its journal says.
func CostSoFar(dir string) (float64, error) {
	end, err := endingOf(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	return end.CostUSD, err
}

func (s *Supervisor) logOr() io.Writer {
	if s.Log == nil {
		return io.Discard
	}
	return s.Log
}

// driverExit is how a driver exited, with the end of what it wrote on standard error.
type driverExit struct {
	err    error
	stderr string
}

func (e *driverExit) Error() string { return e.err.Error() }
func (e *driverExit) Unwrap() error { return e.err }

// lastLine is the last line a driver that exited with err wrote on standard error, or err.
func lastLine(err error) string {
	var de *driverExit
	if errors.As(err, &de) {
		if lines := strings.Split(strings.TrimSpace(de.stderr), "\n"); lines[len(lines)-1] != "" {
			return lines[len(lines)-1]
		}
	}
	return fmt.Sprint(err)
}

// tailWriter keeps the last max bytes written to it (a driver's standard error: bounded, however
// much it writes).
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append(w.b[:0], w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
