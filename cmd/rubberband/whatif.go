package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

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

// WhatIf is the JSON output of whatif.
type WhatIf struct {
	Experiment string        `json:"experiment"`
	Sweeps     []string      `json:"sweeps"`
	Planners   []string      `json:"planners"`
	Points     []WhatIfPoint `json:"points"`
}

// WhatIfPoint is one grid point: the swept values as given, and each planner's outcome.
type WhatIfPoint struct {
	Params  map[string]string          `json:"params"`
	Results map[string]planner.Outcome `json:"results"`
	Error   string                     `json:"error,omitempty"`
	values  spec.Point
}

func whatifAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("whatif needs exactly one SPEC argument")
	}
	file := c.Args().First()
	data, err := spec.ReadFile(file) // bounded: not /dev/zero, not a FIFO
	if err != nil {
		return usageErr("read spec: %v", err)
	}
	if _, err := loadSpec(c, c.App.ErrWriter); err != nil { // the spec itself must be valid
		return err
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
	dir := filepath.Dir(file)
	read := func(rel string) ([]byte, error) {
		if !filepath.IsAbs(rel) {
			rel = filepath.Join(dir, rel)
		}
		return spec.ReadFile(rel)
	}
	grid := spec.Grid(sweeps)
	// Every point's spec is checked before any is planned: a bad value fails at once.
	exps := make([]*spec.Experiment, len(grid))
	for i, pt := range grid {
		exp, err := spec.ApplyPoint(file, data, read, sweeps, pt)
		if err != nil {
			return usageErr("at %s: %v", describe(sweeps, pt), err)
		}
		if n := c.Int("samples"); n > 0 {
			exp.Planner.Samples = n
		}
		exps[i] = exp
	}
	out := WhatIf{Experiment: exps[0].Name, Planners: names, Points: make([]WhatIfPoint, len(grid))}
	for _, sw := range sweeps {
		out.Sweeps = append(out.Sweeps, sw.Name)
	}
	var done atomic.Int64
	stop := ticker(c.App.ErrWriter, "whatif", func() string { return fmt.Sprintf("%d/%d points", done.Load(), len(grid)) })
	points := planner.Sweep(c.Context, exps, names, 0, func(n, _ int) { done.Store(int64(n)) })
	stop()
	for i, p := range points {
		pt := WhatIfPoint{Params: map[string]string{}, Results: p.Results, values: grid[i]}
		for k, sw := range sweeps {
			pt.Params[sw.Name] = grid[i][k]
		}
		if p.Err != nil { // the row names the point
			pt.Error = errors.Unwrap(p.Err).Error()
		}
		out.Points[i] = pt
	}
	if p := c.String("plot"); p != "" {
		if err := plotWhatIf(p, out, sweeps); err != nil {
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

func describe(sweeps []spec.Sweep, pt spec.Point) string {
	parts := make([]string, len(sweeps))
	for i, sw := range sweeps {
		parts[i] = sw.Name + "=" + pt[i]
	}
	return strings.Join(parts, " ")
}

func printWhatIf(w io.Writer, out WhatIf, sweeps []spec.Sweep) {
	cols := append([]string(nil), out.Sweeps...)
	for _, n := range out.Planners {
		cols = append(cols, strings.ToUpper(n))
	}
	cols = append(cols, "SAVING")
	var buf bytes.Buffer
	t := newTable(&buf, cols...)
	for _, p := range out.Points {
		row := make([]any, 0, len(cols))
		for _, v := range p.values {
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
				row = append(row, "misses ("+clock(o.Predicted.JCT.P50)+")")
			default:
				row = append(row, fmt.Sprintf("%s in %s", money(o.Predicted.Cost.Mean), clock(o.Predicted.JCT.Mean)))
			}
		}
		best := "—"
		for _, n := range []string{spec.PlannerOptimal, spec.PlannerGreedy} {
			if o, ok := p.Results[n]; ok && o.SavingPct != nil {
				best = fmt.Sprintf("%.0f%% (%s)", *o.SavingPct, n)
				break
			}
		}
		row = append(row, best)
		t.row(row...)
	}
	t.flush()
	w.Write(buf.Bytes())
	for _, p := range out.Points { // each error said in full, by its point
		if p.Error != "" {
			fmt.Fprintf(w, "error at %s: %s\n", describe(sweeps, p.values), p.Error)
		}
	}
	fmt.Fprintln(w, "\ncells: mean cost in mean JCT; 'misses' gives the fastest plan's p50 JCT; SAVING is against the best static cluster")
}

func writeWhatIfCSV(w io.Writer, out WhatIf, sweeps []spec.Sweep) error {
	cw := csv.NewWriter(w)
	head := append(append([]string(nil), out.Sweeps...), "planner", "feasible", "jct_mean_s", "jct_p5_s", "jct_p50_s", "jct_p95_s",
		"cost_mean_usd", "cost_p5_usd", "cost_p50_usd", "cost_p95_usd", "deadline_miss_prob", "saving_pct")
	cw.Write(head)
	for _, p := range out.Points {
		for _, n := range out.Planners {
			o, ok := p.Results[n]
			row := append([]string(nil), p.values...)
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
