package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/urfave/cli/v2"
)

// cancelFile, in a state directory, asks its driver to mark the run cancelled when it stops.
const cancelFile = "cancel"

func cancelRequested(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, cancelFile))
	return err == nil
}

func cancelCommand() *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "stop a run for good: its gangs are stopped and every node it holds is released",
		ArgsUsage: "RUN",
		Description: "A live driver on this host is asked to stop (SIGTERM) and waited for. When no driver is alive,\n" +
			"cancel ends the run's gangs and releases its nodes itself. A driver on another host is refused:\n" +
			"cancel it there. `resume` refuses a cancelled run unless --force.",
		Flags:        []cli.Flag{rootFlag(), &cli.DurationFlag{Name: "wait", Value: 2 * time.Minute, Usage: "how long to wait for the driver to stop"}},
		BashComplete: completeRun,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("cancel needs exactly one RUN argument")
			}
			st, err := openRun(c)
			if err != nil {
				return err
			}
			holder, live, err := executor.ReadHolder(st.dir)
			if err != nil {
				return err
			}
			if live {
				return cancelLive(c, st, holder)
			}
			return cancelStale(c, st)
		},
	}
}

// cancelLive asks the driver holding the lock to stop, and waits for it.
func cancelLive(c *cli.Context, st *state, h executor.Holder) error {
	host, _ := os.Hostname()
	if h.Host != host {
		return &exitErr{code: exitError, err: fmt.Errorf("the run's driver is PID %d on host %s: cancel it there (this is %s)", h.PID, h.Host, host)}
	}
	if h.PID <= 0 {
		return &exitErr{code: exitError, err: fmt.Errorf("the run's lock is held, but its holder is not recorded yet: try again")}
	}
	if err := os.WriteFile(filepath.Join(st.dir, cancelFile), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	if err := syscall.Kill(h.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal the driver (PID %d): %w", h.PID, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "rubberband: asked the driver (PID %d) to stop; waiting for it to release the run's nodes\n", h.PID)
	for deadline := time.Now().Add(c.Duration("wait")); ; time.Sleep(100 * time.Millisecond) {
		if _, live, err := executor.ReadHolder(st.dir); err == nil && !live {
			break
		}
		if time.Now().After(deadline) {
			return &exitErr{code: exitError, err: fmt.Errorf("the driver (PID %d) is still running after %s", h.PID, c.Duration("wait"))}
		}
	}
	// The driver marked the run cancelled as it stopped; if it died first, finish the job here.
	return cancelStale(c, st)
}

// cancelStale cancels a run whose driver is gone: its gangs are ended and every node the journal
// and the provider know of is released.
func cancelStale(c *cli.Context, st *state) error {
	lock, err := lockState(c, st.dir, st.run.RunID)
	if err != nil {
		return err
	}
	defer lock.Close()
	events, err := executor.ReadJournal(filepath.Join(st.dir, "journal.jsonl"))
	if err != nil {
		return err
	}
	for _, e := range events {
		switch e.Ev {
		case executor.EvCancel:
			os.Remove(filepath.Join(st.dir, cancelFile))
			fmt.Fprintf(c.App.Writer, "%s is cancelled\n", st.dir)
			return nil
		case executor.EvFinish:
			fmt.Fprintf(c.App.Writer, "%s had finished: nothing to cancel\n", st.dir)
			return nil
		}
	}
	journal, past, err := executor.OpenJournal(filepath.Join(st.dir, "journal.jsonl"))
	if err != nil {
		return err
	}
	defer journal.Close()
	provider, runtime, stop, err := openBackend(c.Context, st, c.App.ErrWriter)
	if err != nil {
		return err
	}
	defer stop()
	cfg := executor.Config{Experiment: st.exp, Alloc: st.alloc, Provider: provider, Runtime: runtime, Journal: journal, Past: past,
		RunID: st.run.RunID, TimeScale: st.run.TimeScale, Log: c.App.ErrWriter}
	if err := executor.Cancel(context.WithoutCancel(c.Context), cfg, "cancelled by `rubberband cancel`"); err != nil {
		return err
	}
	os.Remove(filepath.Join(st.dir, cancelFile))
	fmt.Fprintf(c.App.Writer, "%s is cancelled\n", st.dir)
	return nil
}
