package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/profiler"
	"github.com/rubberband-hpo/rubberband/internal/format"
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
			&cli.IntFlag{Name: "rounds", Value: 3, Usage: "measured rounds per GPU count after a warm-up (the start-up is their median)"},
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
		return usageErr("%v", err)
	} else if err != nil {
		return err
	}
	if err := resolveWorkdir(c.App.ErrWriter, exp, src.Path); err != nil {
		return err
	}
	if typ := c.String("instance-type"); typ != "" {
		if exp, err = exp.OnType(typ); err != nil {
			return usageErr("--instance-type: %v", err)
		}
	}
	iters, scale := c.Int("iters"), c.Float64("time-scale")
	if iters < 2 || scale <= 0 {
		return usageErr("--iters must be at least 2 and --time-scale above 0")
	}
	var counts []int
	for _, f := range strings.Split(c.String("gpus"), ",") {
		g, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || g < 1 {
			return usageErr("--gpus: %q is not a GPU count", f)
		}
		counts = append(counts, g)
	}
	if c.Int("rounds") < 1 {
		return usageErr("--rounds must be at least 1")
	}
	if c.IsSet("first-wave") && c.Int("first-wave") < 1 {
		return usageErr("--first-wave must be at least 1")
	}
	tmp, err := os.MkdirTemp("", "rubberband-profile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	backend, scratch, err := driver.OpenProfiling(c.Context, c.String("backend"), exp, tmp, scale, counts, c.App.ErrWriter)
	if err != nil {
		return err
	}
	defer backend.Close() // reused trainer processes (trainer.reuse) end with the profile
	if backend.Kind.SharesNoDisk {
		fmt.Fprintf(c.App.ErrWriter, "profiling on EC2 %s instances (its scratch checkpoints are under %s)\n", exp.Cluster.InstanceType, scratch.Checkpoints.URL)
	}
	cfg := profiler.Config{Experiment: scratch, Runtime: backend.Runtime, Provider: backend.Provider, GPUs: counts, Iters: iters, TimeScale: scale,
		Rounds: c.Int("rounds"), Measured: func(p profiler.Point) {
			fmt.Fprintf(c.App.ErrWriter, "%s: %.4f s per iteration (std %.4f), start-up %.3f s, launch overhead %.3f s, first-stage lag %.3f s\n",
				format.Plural(p.GPUs, "GPU"), p.Mean, p.Std, p.Startup, p.Overhead, p.Lag)
		}}
	if backend.Kind.LocalTrainers {
		cfg.FirstWave = profiler.FirstWave(exp)
		if c.IsSet("first-wave") {
			cfg.FirstWave = c.Int("first-wave")
		}
	}
	prof, err := profiler.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	notes := fmt.Sprintf("measured by `rubberband profile` on %s, %s, %d iterations per GPU count", hostname(), time.Now().UTC().Format("2006-01-02"), iters)
	if typ := exp.Cluster.InstanceType; typ != "" {
		notes += fmt.Sprintf(", for instance type %s (%s per node)", typ, format.Plural(exp.Cluster.GPUsPerNode, "GPU"))
	}
	if err := prof.Write(&buf, notes); err != nil {
		return err
	}
	if len(prof.NodeScale) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "node start-up: request to running %s s (%s), running to ready for trials %s s (%s); the profile file notes both\n",
			profiler.Seconds(prof.NodeScale), profiler.ScaleLatencyField, profiler.Seconds(prof.NodeInit), profiler.InitLatencyField)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write profile: %w", err)
	}
	if !exp.MissingProfile() {
		fmt.Fprintf(c.App.ErrWriter, "wrote %s\n", out)
		return nil
	}
	// The spec had none: name this one in it, so that plan and run use it as they are.
	opts, err := specOptions(c)
	if err != nil {
		return err
	}
	rel, err := starter.NameProfile(exp, out, filepath.IsAbs(c.String("out")), opts...)
	if err != nil {
		return fmt.Errorf("wrote %s, but: %w", out, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "wrote %s and named it in %s (profile: {file: %s}); next: rubberband plan %s\n", out, exp.File, filepath.ToSlash(rel), exp.File)
	return nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "this machine"
	}
	return h
}
