package main

import (
	"io"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/logcap"
	"github.com/rubberband-hpo/rubberband/rundir"
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

// backendFlag chooses where runs go; RUBBERBAND_BACKEND sets its default for a shell or a team.
func backendFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "backend", Value: driver.Local, EnvVars: []string{"RUBBERBAND_BACKEND"}, Usage: usage}
}

// driverFlags are the flags of the commands that drive a run (run, resume), then more. The
// driver log in the state directory stays text whatever --log-format; --trainer-log-mb keeps a
// trainer that writes without end from filling the disk.
func driverFlags(more ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "keep-nodes", Usage: "keep the nodes of a run that fails, pauses or is interrupted (they are released otherwise)"},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "driver messages on standard error: text, or json (one object per line)"},
		&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics at http://ADDR/metrics while the run goes (127.0.0.1:9464, say)"},
		&cli.BoolFlag{Name: "no-replan", Usage: "keep the plan as it is: do not re-plan the stages not yet started, or an ASHA schedule from its phase on, from what the run observes (a budget is still watched)"},
		&cli.IntFlag{Name: "trainer-log-mb", Value: logcap.DefaultMax >> 20, EnvVars: []string{"RUBBERBAND_TRAINER_LOG_MB"},
			Usage: "bound each trial's log (LOGS/TRIAL.log) and the driver log at this many MiB; past it the file is rotated once (.log.1) and says so"},
	}, more...)
}

func checkLogFormat(c *cli.Context) error {
	if f := c.String("log-format"); f != "text" && f != "json" {
		return driver.UsageError("--log-format %q: text or json", f)
	}
	return nil
}

// applyOverrides puts the command line's settings over the spec's (Experiment.Override).
func applyOverrides(c *cli.Context, exp *spec.Experiment) error {
	o := spec.Overrides{Deadline: setFlag(c, "deadline", c.String), Quantile: setFlag(c, "quantile", c.Float64),
		Samples: setFlag(c, "samples", c.Int), Seed: setFlag(c, "seed", c.Int64), Planner: setFlag(c, "planner", c.String)}
	if err := exp.Override(o); err != nil {
		return driver.UsageError("%v", err)
	}
	return checkOutput(c)
}

// setFlag is the named flag's value when the command line sets it, nil otherwise.
func setFlag[T any](c *cli.Context, name string, value func(string) T) *T {
	if !c.IsSet(name) {
		return nil
	}
	v := value(name)
	return &v
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

// openOneRun opens the run the command's single RUN argument names (openRun).
func openOneRun(c *cli.Context) (*rundir.State, error) {
	if c.NArg() != 1 {
		return nil, driver.UsageError("%s needs exactly one RUN argument", c.Command.Name)
	}
	return openRun(c)
}

// printOutput writes v as JSON under -o json, else as table writes it.
func printOutput(c *cli.Context, v any, table func(io.Writer)) error {
	if c.String("output") == "json" {
		return format.JSON(c.App.Writer, v)
	}
	table(c.App.Writer)
	return nil
}
