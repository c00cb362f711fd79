package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

func logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print a run's driver log, or with TRIAL that trial's output (every launch, every worker)",
		ArgsUsage: "RUN [TRIAL]",
		Description: "RUN is a run's name or ID under the root folder (`rubberband list`), or its state directory;\n" +
			"TRIAL is a trial's ID (`rubberband status RUN --trials` lists them). Terminal escape sequences and\n" +
			"control characters but newlines and tabs are removed from what a trainer printed (a note on\n" +
			"standard error counts them); --raw prints the bytes as they are.",
		Flags: []cli.Flag{rootFlag(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing what is written until the run's driver stops"},
			&cli.IntFlag{Name: "tail", Aliases: []string{"n"}, Value: -1, Usage: "start with the last N lines (default: all)"},
			&cli.BoolFlag{Name: "raw", Usage: "print the log's bytes as they are, terminal escape sequences included"},
		},
		BashComplete: completeRun,
		Action:       logsAction,
	}
}

func logsAction(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return driver.UsageError("logs needs RUN and at most one TRIAL")
	}
	st, err := openRun(c)
	if err != nil {
		return err
	}
	path := filepath.Join(st.Dir, rundir.DriverLog)
	if c.NArg() == 2 {
		if path, err = rundir.TrialLogOf(st.Dir, c.Args().Get(1)); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, done := logWriter(c, filepath.Base(path))
	defer done()
	if err := rundir.PrintLog(ctx, st.Dir, path, c.Int("tail"), c.Bool("follow"), w); errors.Is(err, rundir.ErrNoOutput) {
		fmt.Fprintf(c.App.ErrWriter, "rubberband: %s has no output yet\n", filepath.Base(path))
	} else if err != nil {
		return err
	}
	return nil
}

// logWriter is where logs writes what, cleaned of terminal control codes unless --raw; done says
// how many were removed.
func logWriter(c *cli.Context, what string) (w io.Writer, done func()) {
	if c.Bool("raw") {
		return c.App.Writer, func() {}
	}
	return term.CleanTo(c.App.Writer, c.App.ErrWriter, what)
}
