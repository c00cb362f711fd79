package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/internal/charts"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
)

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:      "simulate",
		Usage:     "predict the time and cost of a given allocation plan",
		ArgsUsage: "SPEC",
		Flags: append(predictionFlags(), catalogFlag(),
			&cli.StringFlag{Name: "plan", Usage: "a plan `FILE` written by rubberband plan --out (at most 4 MiB)"},
			&cli.StringFlag{Name: "gantt", Usage: "draw the cluster schedule of one sampled run (FILE.png or FILE.svg)"},
			&cli.StringFlag{Name: "hist", Usage: "draw JCT (FILE) and cost (FILE-cost) histograms, deadline marked"},
			&cli.StringFlag{Name: "alloc", Usage: "GPUs per stage, e.g. 32,20,12,8; brackets separated by ';'; GPUS/NODES holds more nodes than the GPUs need (a static cluster: 24/6,24/6); GPUS@TYPE or GPUS@TYPE:MARKET puts a stage on one of cluster.instance_types (8@p3.2xlarge:spot); +Kod hedges a spot stage with K of its nodes on demand (24/8@:spot+2od)"},
		),
		Action: simulateAction,
	}
}

func simulateAction(c *cli.Context) error {
	exp, _, s, err := prepare(c)
	if err != nil {
		return err
	}
	var alloc sim.Alloc
	name := "given"
	switch {
	case c.IsSet("plan") == c.IsSet("alloc"):
		return usageErr("give exactly one of --plan FILE or --alloc LIST")
	case c.IsSet("plan"):
		rep, err := rundir.ReadPlanFile(c.String("plan"))
		if err != nil {
			return usageErr("%v", err)
		}
		if alloc, err = rep.Alloc(s.Brackets()); err != nil {
			return usageErr("%s: %v", c.String("plan"), err)
		}
		name = rep.Planner
	default:
		if alloc, err = sim.ParseAlloc(s.Model(), c.String("alloc")); err != nil {
			return usageErr("--alloc: %v", err)
		}
	}
	if err := s.Model().Check(s.Brackets(), alloc); err != nil {
		return usageErr("%v", err)
	}
	res, err := s.Simulate(alloc)
	if err != nil {
		return err
	}
	deadline := exp.Deadline.Seconds()
	feasible := deadline == 0 || sim.Quantile(res.Outcome.JCT, exp.Planner.DeadlineQuantile) <= deadline
	if g := c.String("gantt"); g != "" {
		if err := charts.PlanSchedule(g, s, alloc, exp.Name+": cluster schedule, one sampled run"); err != nil {
			return err
		}
	}
	if h := c.String("hist"); h != "" {
		if err := charts.Predictions(h, res, deadline, exp.Name); err != nil {
			return err
		}
	}
	rep := planner.NewReport(exp, name, deadline, feasible, res)
	if c.String("output") == "json" {
		if err := writeJSON(c.App.Writer, rep); err != nil {
			return err
		}
	} else {
		rep.WriteTable(c.App.Writer)
	}
	return planner.CheckOutcome(exp, res.Outcome) // exit 3, as plan's

}
