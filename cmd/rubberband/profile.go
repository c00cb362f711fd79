package main

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/spec/starter"
	"github.com/urfave/cli/v2"
)

func profileCommand() *cli.Command {
	return &cli.Command{
		Name:      "profile",
		Usage:     "measure the trainer's iteration and start-up latency at each GPU count, and write a profile",
		ArgsUsage: "SPEC",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "gpus", Value: "1,2,4", Usage: "GPU counts to measure"},
			&cli.IntFlag{Name: "iters", Value: 5, Usage: "iterations per measurement (at least 2)"},
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "measured rounds per GPU count after a warm-up (every launch's start-up is kept: the profile gives their spread)"},
			&cli.StringFlag{Name: "out", DefaultText: "the file the spec's profile names; for a spec without a profile, SPEC's name with .profile.yaml, named in the spec", Usage: "profile `FILE` to write (use it as profile: {file: ...})"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "divide what is measured by this (for the synthetic trainer's RB_TIME_SCALE)"},
			&cli.IntFlag{Name: "first-wave", DefaultText: "the first stage's trials, as far as max_nodes' GPUs go", Usage: "on the local backend, how many gangs the cold round launches at once to measure first_stage_lag (the first stage's widest wave)"},
			&cli.StringFlag{Name: "instance-type", DefaultText: "cluster.instance_type", Usage: "the candidate of cluster.instance_types to measure on (its GPUs per node; on ec2, instances of it)"},
			backendFlag(driver.Names(func(k driver.Kind) bool { return !k.Simulated }) + ": measure where the job will run (a Nomad job's start-up included; on ec2, instances of cluster.instance_type, rented and terminated for the measurement)"),
		},
		Action: profileAction,
	}
}

func profileAction(c *cli.Context) error {
	// Measuring a profile is this command's job: the spec need not have one.
	exp, src, err := loadSpec(c, c.App.ErrWriter, spec.ProfileOptional())
	if err != nil {
		return err
	}
	out, err := starter.ProfileFile(exp, c.String("out"), c.String("instance-type"))
	if errors.Is(err, starter.ErrNeedOut) {
		return driver.UsageError("%v", err)
	} else if err != nil {
		return err
	}
	if err := driver.ResolveWorkdir(c.App.ErrWriter, exp, src.Path); err != nil {
		return err
	}
	if typ := c.String("instance-type"); typ != "" {
		if exp, err = exp.OnType(typ); err != nil {
			return driver.UsageError("--instance-type: %v", err)
		}
	}
	p, err := driver.ProfilingOf(driver.Profiling{Backend: c.String("backend"), Spec: exp, Iters: c.Int("iters"), Rounds: c.Int("rounds"),
		TimeScale: c.Float64("time-scale"), FirstWave: c.Int("first-wave")}, c.String("gpus"), c.IsSet("first-wave"))
	if err != nil {
		return err
	}
	prof, err := driver.Profile(c.Context, p, c.App.ErrWriter)
	if err != nil {
		return err
	}
	opts, err := specOptions(c)
	if err != nil {
		return err
	}
	rel, err := driver.SaveProfile(exp, out, prof, filepath.IsAbs(c.String("out")), opts...)
	if err != nil {
		return err
	} else if rel == "" {
		fmt.Fprintf(c.App.ErrWriter, "wrote %s\n", out)
		return nil
	}
	fmt.Fprintf(c.App.ErrWriter, "wrote %s and named it in %s (profile: {file: %s}); next: rubberband plan %s\n", out, exp.File, rel, exp.File)
	return nil
}
