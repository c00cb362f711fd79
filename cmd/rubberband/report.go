package main

import (
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
	st, err := openOneRun(c)
	if err != nil {
		return err
	}
	return rundir.Report(st, c.App.Writer, c.String("output") == "json", c.String("plots"))
}
