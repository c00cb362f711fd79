package main

import (
	"os"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "report on a finished or running run, with pictures",
		ArgsUsage: "RUN",
		Flags: []cli.Flag{rootFlag(), outputFlag(),
			&cli.StringFlag{Name: "plots", Usage: "write curves.png, gantt-planned.png, gantt-realized.png, cost.png and search.png (the best trial's curve, each parameter against the objective) into this directory"},
		},
		BashComplete: completeRun,
		Action:       reportAction,
	}
}

func reportAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("%s needs exactly one RUN argument", c.Command.Name)
	}
	st, err := openRun(c)
	if err != nil {
		return err
	}
	r, err := rundir.Replay(st)
	if err != nil {
		return err
	}
	if dir := c.String("plots"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := r.Plot(dir); err != nil {
			return err
		}
	}
	return r.WriteReport(c.App.Writer, c.String("output") == "json")
}
