package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/internal/charts"
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
	events, err := executor.ReadJournal(filepath.Join(st.Dir, rundir.Journal))
	if err != nil {
		return err
	}
	cfg := st.Config()
	cfg.Past = events
	res, err := executor.Replay(cfg)
	if err != nil {
		return err
	}
	found := rundir.Search(&rundir.View{State: st, Res: res, Events: events})
	if dir := c.String("plots"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := charts.Run(dir, st, res, events); err != nil {
			return err
		}
		if err := charts.Search(filepath.Join(dir, "search.png"), st.Exp, found); err != nil {
			return err
		}
	}
	if c.String("output") == "json" {
		rep := executor.Compare(st.Plan, res)
		return writeJSON(c.App.Writer, struct {
			*executor.Report
			Search *rundir.SearchSummary `json:"search"`
		}{&rep, found})
	}
	if err := printRun(c, st, res); err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer)
	rundir.WriteSearch(c.App.Writer, found)
	return nil
}
