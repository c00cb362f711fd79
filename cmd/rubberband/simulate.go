package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/driver"
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
	if c.IsSet("plan") == c.IsSet("alloc") {
		return driver.UsageError("give exactly one of --plan FILE or --alloc LIST")
	}
	given := c.String("alloc")
	if c.IsSet("plan") {
		given = c.String("plan")
	}
	p, err := driver.Simulate(exp, s, c.IsSet("plan"), given, c.String("gantt"), c.String("hist"))
	if err != nil {
		return err
	}
	return printPredicted(c, p) // exit 3, as plan's
}
