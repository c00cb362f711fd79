package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/executor/profiler"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
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
			&cli.StringFlag{Name: "out", Required: true, Usage: "profile file to write (use it as profile: {file: ...})"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "divide what is measured by this (for the synthetic trainer's RB_TIME_SCALE)"},
			&cli.StringFlag{Name: "instance-type", DefaultText: "cluster.instance_type", Usage: "the candidate of cluster.instance_types to measure on (its GPUs per node; on ec2, instances of it)"},
			backendFlag("local, nomad or ec2: measure where the job will run (a Nomad job's start-up included; on ec2, instances of cluster.instance_type, rented and terminated for the measurement)"),
		},
		Action: profileAction,
	}
}

func profileAction(c *cli.Context) error {
	exp, err := loadSpec(c, c.App.ErrWriter)
	if err != nil {
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
	tmp, err := os.MkdirTemp("", "rubberband-profile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	self, _ := os.Executable()
	if c.Int("rounds") < 1 {
		return usageErr("--rounds must be at least 1")
	}
	cfg := profiler.Config{Experiment: exp, GPUs: counts, Iters: iters, TimeScale: scale, Rounds: c.Int("rounds"), Measured: func(p profiler.Point) {
		fmt.Fprintf(c.App.ErrWriter, "%d GPU(s): %.4f s per iteration (std %.4f), start-up %.3f s\n", p.GPUs, p.Mean, p.Std, p.Startup)
	}}
	switch c.String("backend") {
	case "local": // one virtual node of each GPU count; the trainer's command as local processes
		store, err := file.New(filepath.Join(tmp, "checkpoints"))
		if err != nil {
			return err
		}
		rt := &process.Runtime{Store: store, WorkDir: filepath.Join(tmp, "work"), LogDir: filepath.Join(tmp, "logs"), Self: self, Trainer: trainerBinary(self),
			ExtraEnv: []string{"RB_TIME_SCALE=" + strconv.FormatFloat(scale, 'g', -1, 64)}}
		defer rt.Close() // reused trainer processes (trainer.reuse) end with the profile
		cfg.Runtime = rt
		local := *exp
		local.Trainer.Image = "" // processes run the command
		cfg.Experiment = &local
	case "nomad":
		exp.Checkpoints = spec.Checkpoints{} // a scratch store in tmp: profiling keeps nothing
		provider, rt, stop, err := nomadBackend(c.Context, exp, tmp, scale, self, executor.NewRunID(time.Now(), rand.Uint32()))
		if err != nil {
			return err
		}
		defer stop()
		cfg.Runtime, cfg.Provider = rt, provider
	case "ec2":
		// Instances share no disk with this machine: the run's S3 store, under a scratch prefix
		// of the profile's own.
		runID := executor.NewRunID(time.Now(), rand.Uint32())
		exp.Checkpoints.URL = strings.TrimSuffix(exp.Checkpoints.URL, "/") + "/rubberband-profile/" + runID
		peak := 0
		for _, g := range counts {
			peak = max(peak, (g+max(exp.Cluster.GPUsPerNode, 1)-1)/max(exp.Cluster.GPUsPerNode, 1))
		}
		provider, rt, stop, err := ec2Backend(c.Context, exp, tmp, scale, runID, sim.Alloc{{{Nodes: peak}}}) // of the profiled type
		if err != nil {
			return err
		}
		defer stop()
		cfg.Runtime, cfg.Provider = rt, provider
		// The instances' watchdogs and the workers watch the driver's heartbeat: beat.
		store, err := openStore(c.Context, exp, tmp)
		if err != nil {
			return err
		}
		beat, endBeat := context.WithCancel(c.Context)
		defer endBeat()
		go heartbeat.Beat(beat, store, runID, heartbeat.Every, func(err error) { fmt.Fprintln(c.App.ErrWriter, err) })
		fmt.Fprintf(c.App.ErrWriter, "profiling on EC2 %s instances (run %s; its scratch checkpoints are under %s)\n", exp.Cluster.InstanceType, runID, exp.Checkpoints.URL)
	default:
		return usageErr("--backend %q is not a backend (local, nomad or ec2)", c.String("backend"))
	}
	prof, err := profiler.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	notes := fmt.Sprintf("measured by `rubberband profile` on %s, %s, %d iterations per GPU count", hostname(), time.Now().UTC().Format("2006-01-02"), iters)
	if typ := exp.Cluster.InstanceType; typ != "" {
		notes += fmt.Sprintf(", for instance type %s (%d GPUs per node)", typ, exp.Cluster.GPUsPerNode)
	}
	if err := prof.Write(&out, notes); err != nil {
		return err
	}
	if len(prof.NodeStart) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "node start-up: %s s (cluster.scale_latency + init_latency)\n", profiler.Seconds(prof.NodeStart))
	}
	if err := os.WriteFile(c.String("out"), out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write profile: %w", err)
	}
	return nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "this machine"
	}
	return h
}
