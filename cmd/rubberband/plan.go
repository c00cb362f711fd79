package main

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/rubberband-hpo/rubberband/internal/charts"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
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
	if exp.Algorithm.IsASHA() {
		return planASHA(c, exp, s.Model())
	}
	rep, res, err := makePlan(c, exp, s)
	if err != nil {
		return err
	}
	if g := c.String("gantt"); g != "" {
		if err := charts.PlanSchedule(g, s, res.Best.Alloc, fmt.Sprintf("%s: %s plan, one sampled run", exp.Name, exp.Planner.Name)); err != nil {
			return err
		}
	}
	if out := c.String("out"); out != "" && res.Feasible {
		if err := writePlanFile(out, rep); err != nil {
			return err
		}
	}
	if c.String("output") == "json" {
		if err := writeJSON(c.App.Writer, rep); err != nil {
			return err
		}
	} else {
		rep.WriteTable(c.App.Writer)
	}
	if err := res.Check(exp); err != nil {
		return err
	}
	return planner.CheckBudget(exp, rep)
}

// makePlan plans with the spec's planner (planner.Plan), its progress on standard error after
// the first second.
func makePlan(c *cli.Context, exp *spec.Experiment, s *sim.Simulator) (*planner.Report, *planner.Result, error) {
	w := c.App.ErrWriter
	if c.String("log-format") == "json" { // run's standard error holds JSON lines only
		w = io.Discard
	}
	var evaluated atomic.Int64
	stop := term.Ticker(w, "planning", func() string { return format.Plural(int(evaluated.Load()), "plan") + " simulated" })
	defer stop()
	return planner.Plan(c.Context, exp, s, func(n int) { evaluated.Store(int64(n)) })
}

// planASHA plans an ASHA job: its GPU schedule beside the best fixed-slot ASHA and synchronous
// SHA. A feasible one is written with --out, for `run --plan`.
func planASHA(c *cli.Context, exp *spec.Experiment, m *sim.Model) error {
	res, err := planner.PlanASHA(c.Context, exp, m)
	if err != nil {
		return err
	}
	rep := res.Report(exp)
	if g := c.String("gantt"); g != "" {
		sc, err := m.ScheduleASHA(*exp.Algorithm.ASHA, res.Elastic.Plan, uint64(exp.Seed))
		if err != nil {
			return err
		}
		if err := charts.Schedule(g, fmt.Sprintf("%s: asha schedule %s GPUs, one sampled run", exp.Name, res.Elastic.Plan), sc, func(sp sim.Span) int { return sp.Trial }); err != nil {
			return err
		}
	}
	if out := c.String("out"); out != "" && res.Elastic.Feasible {
		if err := writePlanFile(out, rep); err != nil {
			return err
		}
	}
	if c.String("output") == "json" {
		if err := writeJSON(c.App.Writer, res); err != nil {
			return err
		}
	} else {
		res.WriteTable(c.App.Writer)
	}
	return res.Check(exp)
}

// writePlanFile writes a plan file (`plan --out`), as rundir.ReadPlanFile reads it.
func writePlanFile(path string, rep *planner.Report) error {
	data, err := planner.EncodeReport(rep)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}
