package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a run's progress: its stages predicted beside realized, and with --trials every trial",
		ArgsUsage: "RUN",
		Description: "RUN is a run's name or ID under the root folder (`rubberband list`), or its state directory.\n" +
			"With --watch it redraws until the run's driver stops.",
		Flags: []cli.Flag{rootFlag(), outputFlag(),
			&cli.BoolFlag{Name: "trials", Aliases: []string{"t"}, Usage: "one row per trial: stage reached, state, last metric, node"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "follow the run: redraw until its driver stops"},
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "how often --watch redraws"},
		},
		BashComplete: completeRun,
		Action:       statusAction,
	}
}

func statusAction(c *cli.Context) error {
	if err := checkOutput(c); err != nil {
		return err
	}
	st, err := openOneRun(c)
	if err != nil {
		return err
	}
	return showStatus(c, func() ([]byte, bool, error) { return rundir.StatusNow(st, statusOptions(c)) })
}

// showStatus prints what render draws once, or with --watch redraws it every --interval until
// render says the run is no longer live: here and against a server alike.
func showStatus(c *cli.Context, render func() (out []byte, live bool, err error)) error {
	if !c.Bool("watch") {
		out, _, err := render()
		if err == nil {
			_, err = c.App.Writer.Write(out)
		}
		return err
	}
	if c.Duration("interval") < 10*time.Millisecond {
		return driver.UsageError("--interval %s is too short (at least 10ms)", c.Duration("interval"))
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return term.Watch(ctx, c.App.Writer, c.Duration("interval"), c.String("output") == "table", render)
}

// statusOptions are status's flags as rundir.RenderStatus takes them (here and on a server).
func statusOptions(c *cli.Context) rundir.StatusOptions {
	return rundir.StatusOptions{JSON: c.String("output") == "json", Compact: c.Bool("watch"), Trials: c.Bool("trials")}
}
