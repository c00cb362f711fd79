package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/internal/charts"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/urfave/cli/v2"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "report on a finished or running run, with pictures",
		ArgsUsage: "RUN",
		Flags: []cli.Flag{rootFlag(), outputFlag(),
			&cli.StringFlag{Name: "plots", Usage: "write curves.png, gantt-planned.png, gantt-realized.png and cost.png into this directory"},
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
	events, err := executor.ReadJournal(filepath.Join(st.dir, "journal.jsonl"))
	if err != nil {
		return err
	}
	res, err := executor.Replay(executor.Config{Experiment: st.exp, Alloc: st.alloc, Past: events, TimeScale: st.run.TimeScale})
	if err != nil {
		return err
	}
	if dir := c.String("plots"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := drawRunPlots(dir, st, res, events); err != nil {
			return err
		}
	}
	return printRun(c, st, res)
}

func drawRunPlots(dir string, st *state, res *executor.Result, events []executor.Event) error {
	metric := st.exp.Objective.Metric
	// Learning curves, promotions marked where each sync kept the trial.
	var curves []charts.Curve
	for _, cv := range rundir.LearningCurves(st.exp, events) {
		curves = append(curves, charts.Curve{X: cv.X, Y: cv.Y, Marks: cv.Marks})
	}
	if err := charts.Curves(filepath.Join(dir, "curves.png"), fmt.Sprintf("%s: learning curves of %d trials", st.exp.Name, len(curves)),
		metric, curves); err != nil {
		return err
	}
	// The planned schedule (one sampled run) beside the realized one.
	s, err := newSimulatorFor(st)
	if err != nil {
		return err
	}
	if err := drawGantt(filepath.Join(dir, "gantt-planned.png"), s, st.alloc, st.exp.Name+": planned schedule (one sampled run)"); err != nil {
		return err
	}
	realized := executor.RealizedSchedule(events, st.run.TimeScale, st.exp.Cluster.GPUsPerNode)
	if err := drawSchedule(filepath.Join(dir, "gantt-realized.png"), st.exp.Name+": realized schedule", realized,
		func(sp sim.Span) int { return sp.Trial }, runMarks(res)...); err != nil {
		return err
	}
	// Cost per stage, predicted against realized.
	rep := executor.Compare(st.plan, res)
	var cats []string
	var pred, real []float64
	for _, sr := range rep.Stages {
		cats = append(cats, fmt.Sprintf("%s/%d", sr.Bracket, sr.Stage))
		pred, real = append(pred, sr.Predicted.Cost), append(real, sr.Realized.Cost)
	}
	return charts.Paired(filepath.Join(dir, "cost.png"), st.exp.Name+": cost per stage", "cost (dollars)", cats, pred, real, "predicted", "realized")
}
