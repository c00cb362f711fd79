package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

// driverLog, in a state directory, keeps every message its drivers printed, stamped.
const driverLog = "driver.log"

func logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print a run's driver log, or with TRIAL that trial's output (every launch, every worker)",
		ArgsUsage: "RUN [TRIAL]",
		Description: "RUN is a run's name or ID under the root folder (`rubberband list`), or its state directory;\n" +
			"TRIAL is a trial's ID (`rubberband status RUN --trials` lists them).",
		Flags: []cli.Flag{rootFlag(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing what is written until the run's driver stops"},
			&cli.IntFlag{Name: "tail", Aliases: []string{"n"}, Value: -1, Usage: "start with the last N lines (default: all)"},
		},
		BashComplete: completeRun,
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 2 {
				return usageErr("logs needs RUN and at most one TRIAL")
			}
			st, err := openRun(c)
			if err != nil {
				return err
			}
			path := filepath.Join(st.dir, driverLog)
			if c.NArg() == 2 {
				if path, err = trialLog(st, c.Args().Get(1)); err != nil {
					return err
				}
			}
			f, err := os.Open(path)
			if errors.Is(err, fs.ErrNotExist) && c.Bool("follow") {
				f, err = waitForFile(c, st.dir, path)
			}
			if errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(c.App.ErrWriter, "rubberband: %s has no output yet\n", filepath.Base(path))
				return nil
			}
			if err != nil || f == nil {
				return err
			}
			defer f.Close()
			if n := c.Int("tail"); n >= 0 {
				if err := rundir.SeekTail(f, n); err != nil {
					return err
				}
			}
			if _, err := io.Copy(c.App.Writer, f); err != nil {
				return err
			}
			if c.Bool("follow") {
				return follow(c, st.dir, f)
			}
			return nil
		},
	}
}

// trialLog is the log file of a trial of the run, or a usage error naming some that exist.
func trialLog(st *state, id string) (string, error) {
	events, err := executor.ReadJournal(filepath.Join(st.dir, "journal.jsonl"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	path, err := rundir.TrialLog(st.dir, events, id)
	if err != nil {
		return "", usageErr("%v", err)
	}
	return path, nil
}

// follow copies what is appended to f until the run's driver stops (and what it wrote last is
// out), or the user interrupts.
func follow(c *cli.Context, dir string, f *os.File) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := bufio.NewReader(f)
	for {
		_, live, err := executor.ReadHolder(dir)
		if err != nil {
			return err
		}
		if _, err := io.Copy(c.App.Writer, r); err != nil {
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

// waitForFile waits for a log that is not written yet while the run's driver lives.
func waitForFile(c *cli.Context, dir, path string) (*os.File, error) {
	for {
		f, err := os.Open(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return f, err
		}
		if _, live, herr := executor.ReadHolder(dir); herr != nil || !live {
			return nil, err
		}
		select {
		case <-c.Context.Done():
			return nil, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stampLines prefixes every line of p with the time and the run's ID, for the driver log: whoever
// reads it later can tell the drivers of one run apart and line them up with the journal.
func stampLines(p []byte, now time.Time, runID string) []byte {
	var out bytes.Buffer
	prefix := now.UTC().Format("2006-01-02T15:04:05.000Z") + " " + runID + " "
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) > 0 {
			out.WriteString(prefix)
			out.Write(line)
		}
	}
	if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes()
}
