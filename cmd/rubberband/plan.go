package main

import (
	"io"
	"sync/atomic"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/urfave/cli/v2"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "find the cheapest allocation plan that meets the deadline",
		ArgsUsage: "SPEC",
		Flags: append(predictionFlags(), catalogFlag(),
			&cli.StringFlag{Name: "planner", DefaultText: "from the spec", Usage: "static, naive-elastic, greedy or optimal (overrides planner.name)"},
			&cli.StringFlag{Name: "out", Usage: "write the plan as JSON to this file (for simulate --plan and run --plan)"},
			&cli.StringFlag{Name: "gantt", Usage: "draw the plan's cluster schedule (FILE.png or FILE.svg)"},
		),
		Action: planAction,
	}
}

func planAction(c *cli.Context) error {
	exp, _, s, err := prepare(c)
	if err != nil {
		return err
	}
	progress, stop := func(int) {}, func() {}
	if !exp.Algorithm.IsASHA() { // an ASHA job's plans are few
		progress, stop = planTicker(c)
	}
	p, err := driver.PlanJob(c.Context, exp, s, c.String("gantt"), c.String("out"), progress)
	stop()
	if err != nil {
		return err
	}
	return printPredicted(c, p)
}

// printPredicted prints what plan or simulate predicted, then exits as it says (3: infeasible).
func printPredicted(c *cli.Context, p *driver.Predicted) error {
	if err := printOutput(c, p.JSON, p.Table); err != nil {
		return err
	}
	return p.Check
}

// planTicker shows a planner's progress on standard error after the first second: the
// function to pass the planner, and the one that stops it.
func planTicker(c *cli.Context) (progress func(evaluated int), stop func()) {
	w := c.App.ErrWriter
	if c.String("log-format") == "json" { // run's standard error holds JSON lines only
		w = io.Discard
	}
	var evaluated atomic.Int64
	stop = term.Ticker(w, "planning", func() string { return format.Plural(int(evaluated.Load()), "plan") + " simulated" })
	return func(n int) { evaluated.Store(int64(n)) }, stop
}
