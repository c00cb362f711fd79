package main

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

// predictionFlags are the flags plan and simulate share.
func predictionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "deadline", DefaultText: "from the spec", Usage: "deadline as a Go duration (overrides the spec's), e.g. 30m"},
		&cli.Float64Flag{Name: "quantile", DefaultText: "from the spec", Usage: "share of simulated runs that must meet the deadline (overrides planner.deadline_quantile)"},
		&cli.IntFlag{Name: "samples", DefaultText: "from the spec", Usage: "Monte Carlo samples per prediction (overrides planner.samples)"},
		&cli.Int64Flag{Name: "seed", DefaultText: "from the spec", Usage: "random seed (overrides the spec's)"},
		outputFlag(),
	}
}

// applyOverrides puts the command line's settings over the spec's.
func applyOverrides(c *cli.Context, exp *spec.Experiment) error {
	if c.IsSet("deadline") {
		d, err := time.ParseDuration(c.String("deadline"))
		if err != nil || d <= 0 {
			return usageErr("--deadline %q is not a positive Go duration such as 30m", c.String("deadline"))
		}
		exp.Deadline = spec.Duration(d)
	}
	if c.IsSet("quantile") {
		q := c.Float64("quantile")
		if !(q > 0 && q <= 1) {
			return usageErr("--quantile %v is not in (0, 1]", q)
		}
		exp.Planner.DeadlineQuantile = q
	}
	if c.IsSet("samples") {
		n := c.Int("samples")
		if n < 1 || n > spec.MaxSamples {
			return usageErr("--samples %d is out of range (1 to %d)", n, spec.MaxSamples)
		}
		exp.Planner.Samples = n
	}
	if c.IsSet("seed") {
		exp.Seed = c.Int64("seed")
	}
	if c.IsSet("planner") {
		name := c.String("planner")
		if !slices.Contains(spec.PlannerNames(), name) {
			return usageErr("--planner %q is not a planner (%s)", name, strings.Join(spec.PlannerNames(), ", "))
		}
		exp.Planner.Name = name
	}
	if o := c.String("output"); o != "table" && o != "json" {
		return usageErr("--output %q is not a format (table or json)", o)
	}
	return nil
}

// prepare loads the spec named on the command line (and the bytes it parsed), puts the flags
// over it and builds its simulator: what plan, simulate and run start with.
func prepare(c *cli.Context) (*spec.Experiment, *spec.Source, *sim.Simulator, error) {
	exp, src, err := loadSpec(c, c.App.ErrWriter)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := applyOverrides(c, exp); err != nil {
		return nil, nil, nil, err
	}
	s, err := sim.For(exp)
	return exp, src, s, err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
