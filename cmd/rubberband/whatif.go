package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

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
		Flags: []cli.Flag{
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
		return usageErr("whatif needs exactly one SPEC argument")
	}
	exp, src, err := loadSpec(c, c.App.ErrWriter) // the spec itself must be valid
	if err != nil {
		return err
	}
	if exp.Algorithm.IsASHA() && c.IsSet("planners") {
		return usageErr("--planners: an asha job compares its elastic schedule, fixed slots and synchronous sha, not planners")
	}
	var sweeps []spec.Sweep
	for _, s := range c.StringSlice("sweep") {
		sw, err := spec.ParseSweep(s)
		if err != nil {
			return usageErr("%v", err)
		}
		sweeps = append(sweeps, sw)
	}
	if len(sweeps) == 0 {
		return usageErr("give at least one --sweep NAME=VALUES")
	}
	names := strings.Split(c.String("planners"), ",")
	for _, n := range names {
		if !slices.Contains(spec.PlannerNames(), n) {
			return usageErr("--planners: %q is not a planner (%s)", n, strings.Join(spec.PlannerNames(), ", "))
		}
	}
	if o := c.String("output"); o != "table" && o != "json" && o != "csv" {
		return usageErr("--output %q is not a format (table, json or csv)", o)
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
		return writeJSON(c.App.Writer, out)
	case "csv":
		return writeWhatIfCSV(c.App.Writer, out, sweeps)
	}
	printWhatIf(c.App.Writer, out, sweeps)
	return nil
}

func printWhatIf(w io.Writer, out *planner.WhatIf, sweeps []spec.Sweep) {
	cols := append([]string(nil), out.Sweeps...)
	for _, n := range out.Planners {
		cols = append(cols, strings.ToUpper(n))
	}
	cols = append(cols, "SAVING")
	var buf bytes.Buffer
	t := format.NewTable(&buf, cols...)
	for _, p := range out.Points {
		row := make([]any, 0, len(cols))
		for _, v := range p.Values {
			row = append(row, v)
		}
		for _, n := range out.Planners {
			o, ok := p.Results[n]
			switch {
			case p.Error != "":
				row = append(row, "error")
			case !ok:
				row = append(row, "no plan")
			case !o.Feasible:
				row = append(row, "misses ("+format.Clock(o.Predicted.JCT.P50)+")")
			case o.ASHA != nil:
				row = append(row, fmt.Sprintf("%s in %s (%s)", format.Money(o.Predicted.Cost.Mean), format.Clock(o.Predicted.JCT.Mean), o.ASHA))
			default:
				row = append(row, fmt.Sprintf("%s in %s", format.Money(o.Predicted.Cost.Mean), format.Clock(o.Predicted.JCT.Mean)))
			}
		}
		best := "—"
		for _, n := range []string{spec.PlannerOptimal, spec.PlannerGreedy, planner.ASHAElastic} {
			if o, ok := p.Results[n]; ok && o.SavingPct != nil {
				best = fmt.Sprintf("%.0f%% (%s)", *o.SavingPct, n)
				break
			}
		}
		row = append(row, best)
		t.Row(row...)
	}
	t.Flush()
	w.Write(buf.Bytes())
	for _, p := range out.Points { // each error said in full, by its point
		if p.Error != "" {
			fmt.Fprintf(w, "error at %s: %s\n", planner.Describe(sweeps, p.Values), p.Error)
		}
	}
	against := "the best static cluster"
	if out.SavingAgainst == planner.ASHAFixed {
		against = "the best fixed number of slots (asha-fixed), with the GPU schedules in brackets"
	}
	fmt.Fprintf(w, "\ncells: mean cost in mean JCT; 'misses' gives the fastest plan's p50 JCT; SAVING is against %s\n", against)
}

func writeWhatIfCSV(w io.Writer, out *planner.WhatIf, sweeps []spec.Sweep) error {
	cw := csv.NewWriter(w)
	head := append(append([]string(nil), out.Sweeps...), "planner", "feasible", "jct_mean_s", "jct_p5_s", "jct_p50_s", "jct_p95_s",
		"cost_mean_usd", "cost_p5_usd", "cost_p50_usd", "cost_p95_usd", "deadline_miss_prob", "saving_pct")
	cw.Write(head)
	for _, p := range out.Points {
		for _, n := range out.Planners {
			o, ok := p.Results[n]
			row := append([]string(nil), p.Values...)
			if !ok {
				cw.Write(append(row, n, "no plan"))
				continue
			}
			saving := ""
			if o.SavingPct != nil {
				saving = fmt.Sprintf("%.3f", *o.SavingPct)
			}
			j, k := o.Predicted.JCT, o.Predicted.Cost
			cw.Write(append(row, n, fmt.Sprint(o.Feasible), f(j.Mean), f(j.P5), f(j.P50), f(j.P95), f(k.Mean), f(k.P5), f(k.P50), f(k.P95),
				f(o.Predicted.DeadlineMissProb), saving))
		}
	}
	cw.Flush()
	return cw.Error()
}

func f(x float64) string { return fmt.Sprintf("%.4f", x) }
