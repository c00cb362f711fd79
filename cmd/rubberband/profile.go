package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/trial"
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
			&cli.StringFlag{Name: "out", Required: true, Usage: "profile file to write (use it as profile: {file: ...})"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "divide what is measured by this (for the synthetic trainer's RB_TIME_SCALE)"},
		},
		Action: profileAction,
	}
}

func profileAction(c *cli.Context) error {
	exp, err := loadSpec(c, c.App.ErrWriter)
	if err != nil {
		return err
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
	store, err := file.New(filepath.Join(tmp, "checkpoints"))
	if err != nil {
		return err
	}
	self, _ := os.Executable()
	rt := &process.Runtime{Store: store, WorkDir: filepath.Join(tmp, "work"), LogDir: filepath.Join(tmp, "logs"), Self: self,
		ExtraEnv: []string{"RB_TIME_SCALE=" + strconv.FormatFloat(scale, 'g', -1, 64)}}
	params := map[string]any{}
	for name, p := range exp.SearchSpace { // the middle of the space: a typical trial
		switch p.Type {
		case "choice":
			params[name] = p.Values[len(p.Values)/2]
		case "int":
			params[name] = int64((p.Min + p.Max) / 2)
		case "loguniform":
			params[name] = math.Sqrt(p.Min * p.Max)
		default:
			params[name] = (p.Min + p.Max) / 2
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "notes: measured by `rubberband profile` on %s, %s, %d iterations per GPU count\niter_latency:\n",
		hostname(), time.Now().UTC().Format("2006-01-02"), iters)
	startups := []float64{}
	for _, g := range counts {
		mean, std, startup, err := measure(c.Context, rt, exp.Name, exp.Trainer.Command, exp.Trainer.Env, params, g, iters, scale)
		if err != nil {
			return fmt.Errorf("profile at %d GPUs: %w", g, err)
		}
		fmt.Fprintf(c.App.ErrWriter, "%d GPU(s): %.4f s per iteration (std %.4f), start-up %.3f s\n", g, mean, std, startup)
		fmt.Fprintf(&out, "  %d: {mean: %.6g, std: %.6g}\n", g, mean, std)
		startups = append(startups, startup)
	}
	fmt.Fprintf(&out, "startup_latency: {dist: empirical, samples: [%s]}\n", joinFloats(startups))
	if err := os.WriteFile(c.String("out"), []byte(out.String()), 0o644); err != nil {
		return fmt.Errorf("write profile: %w", err)
	}
	return nil
}

// measure runs the trainer on g GPUs of one virtual node and times its reports.
func measure(ctx context.Context, rt *process.Runtime, name string, command []string, env map[string]string, params map[string]any, g, iters int, scale float64) (mean, std, startup float64, err error) {
	node := cloud.Node{ID: "profile", GPUs: g, Addr: "127.0.0.1"}
	id := fmt.Sprintf("profile-%dgpu", g)
	gang := executor.Gang{Trial: id, Command: command, Env: env}
	for r := range g {
		gang.Workers = append(gang.Workers, executor.Worker{Node: node, Env: trial.Env{TrialID: id, Experiment: name, Params: params,
			TargetIter: iters, Rank: r, WorldSize: g, LocalRank: r, MasterAddr: node.Addr, GPUs: []int{r}}})
	}
	start := time.Now()
	h, err := rt.Launch(ctx, gang)
	if err != nil {
		return 0, 0, 0, err
	}
	var at []time.Time
	for rep := range h.Reports() {
		at = append(at, rep.At)
	}
	if err := h.Wait(); err != nil {
		return 0, 0, 0, err
	}
	if len(at) < 2 {
		return 0, 0, 0, fmt.Errorf("the trainer reported %d time(s); need one per iteration", len(at))
	}
	var d []float64
	for i := 1; i < len(at); i++ {
		d = append(d, at[i].Sub(at[i-1]).Seconds()/scale)
	}
	for _, x := range d {
		mean += x
	}
	mean /= float64(len(d))
	for _, x := range d {
		std += (x - mean) * (x - mean)
	}
	if len(d) > 1 {
		std = math.Sqrt(std / float64(len(d)-1))
	}
	startup = max(0, at[0].Sub(start).Seconds()/scale-mean)
	return mean, std, startup, nil
}

func joinFloats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return strings.Join(s, ", ")
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "this machine"
	}
	return h
}
