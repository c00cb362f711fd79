package main

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/charts"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func whatifCommand() *cli.Command {
	return &cli.Command{
		Name:      "whatif",
		Usage:     "predict every planner's cost and time over a grid of spec changes (no execution)",
		ArgsUsage: "SPEC",
		Flags: []cli.Flag{catalogFlag(),
			&cli.StringSliceFlag{Name: "sweep", Usage: "NAME=VALUES: a spec field by path and a list (1s,10s) or range (10m..60m/5m); repeat for a grid"},
			&cli.StringFlag{Name: "planners", Value: strings.Join(spec.PlannerNames(), ","), Usage: "planners to compare"},
			&cli.IntFlag{Name: "samples", DefaultText: "from the spec", Usage: "Monte Carlo samples per prediction (overrides planner.samples)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table, json or csv"},
			&cli.StringFlag{Name: "plot", Usage: "draw cost against the first sweep, one line per planner (FILE.png or FILE.svg)"},
		},
		Action: whatifAction,
	}
}

func whatifAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return driver.UsageError("whatif needs exactly one SPEC argument")
	}
	exp, src, err := loadSpec(c, c.App.ErrWriter) // the spec itself must be valid
	if err != nil {
		return err
	}
	if exp.Algorithm.IsASHA() && c.IsSet("planners") {
		return driver.UsageError("--planners: an asha job compares its elastic schedule, fixed slots and synchronous sha, not planners")
	}
	sweeps, names, err := planner.ParseWhatIf(c.StringSlice("sweep"), c.String("planners"))
	if err != nil {
		return err
	}
	if o := c.String("output"); o != "table" && o != "json" && o != "csv" {
		return driver.UsageError("--output %q is not a format (table, json or csv)", o)
	}
	var done, total atomic.Int64
	stop := term.Ticker(c.App.ErrWriter, "whatif", func() string { return fmt.Sprintf("%d/%d points", done.Load(), total.Load()) })
	out, err := planner.RunWhatIf(c.Context, src, sweeps, names, c.Int("samples"), func(n, of int) { done.Store(int64(n)); total.Store(int64(of)) })
	stop()
	if err != nil {
		return err
	}
	if p := c.String("plot"); p != "" {
		if err := charts.WhatIf(p, out, sweeps); err != nil {
			return err
		}
	}
	switch c.String("output") {
	case "json":
		return format.JSON(c.App.Writer, out)
	case "csv":
		return out.WriteCSV(c.App.Writer)
	}
	out.WriteTable(c.App.Writer, sweeps)
	return nil
}
