package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/spec"
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
			&cli.StringFlag{Name: "backend", Value: "local", Usage: "local or nomad: measure where the job will run (a Nomad job's start-up included)"},
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
	self, _ := os.Executable()
	var rt executor.Runtime
	var nodeStart []float64                                 // seconds from asking for nodes to their being ready
	nodesFor := func(g int) ([]cloud.Node, func(), error) { // local: one virtual node of g GPUs
		return []cloud.Node{{ID: "profile", GPUs: g, Addr: "127.0.0.1"}}, func() {}, nil
	}
	switch c.String("backend") {
	case "local":
		store, err := file.New(filepath.Join(tmp, "checkpoints"))
		if err != nil {
			return err
		}
		rt = &process.Runtime{Store: store, WorkDir: filepath.Join(tmp, "work"), LogDir: filepath.Join(tmp, "logs"), Self: self,
			ExtraEnv: []string{"RB_TIME_SCALE=" + strconv.FormatFloat(scale, 'g', -1, 64)}}
	case "nomad":
		exp.Checkpoints = spec.Checkpoints{} // a scratch store in tmp: profiling keeps nothing
		provider, nrt, stop, err := nomadBackend(c.Context, exp, tmp, scale, self, executor.NewRunID(time.Now(), rand.Uint32()))
		if err != nil {
			return err
		}
		defer stop()
		rt = nrt
		nodesFor = func(g int) ([]cloud.Node, func(), error) {
			n := (g + exp.Cluster.GPUsPerNode - 1) / exp.Cluster.GPUsPerNode
			start := time.Now()
			nodes, err := provider.Create(c.Context, cloud.Request{Count: n})
			if err != nil {
				return nil, nil, err
			}
			nodeStart = append(nodeStart, time.Since(start).Seconds()/scale)
			ids := make([]string, len(nodes))
			for i, nd := range nodes {
				ids[i] = nd.ID
			}
			return nodes, func() { provider.Delete(context.Background(), ids) }, nil
		}
	default:
		return usageErr("--backend %q is not a backend (local or nomad)", c.String("backend"))
	}
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
		nodes, release, err := nodesFor(g)
		if err != nil {
			return fmt.Errorf("profile at %d GPUs: %w", g, err)
		}
		mean, std, startup, err := measure(c.Context, rt, nodes, exp.Name, exp.Trainer.Command, exp.Trainer.Env, params, g, iters, scale)
		release()
		if err != nil {
			return fmt.Errorf("profile at %d GPUs: %w", g, err)
		}
		fmt.Fprintf(c.App.ErrWriter, "%d GPU(s): %.4f s per iteration (std %.4f), start-up %.3f s\n", g, mean, std, startup)
		fmt.Fprintf(&out, "  %d: {mean: %.6g, std: %.6g}\n", g, mean, std)
		startups = append(startups, startup)
	}
	fmt.Fprintf(&out, "startup_latency: {dist: empirical, samples: [%s]}\n", joinFloats(startups))
	if len(nodeStart) > 0 {
		// Not part of a profile: the cluster's own latency, for cluster.init_latency.
		fmt.Fprintf(&out, "# node start-up measured (request to ready): [%s] s; set cluster.scale_latency and init_latency to match\n", joinFloats(nodeStart))
		fmt.Fprintf(c.App.ErrWriter, "node start-up: %s s (cluster.scale_latency + init_latency)\n", joinFloats(nodeStart))
	}
	if err := os.WriteFile(c.String("out"), []byte(out.String()), 0o644); err != nil {
		return fmt.Errorf("write profile: %w", err)
	}
	return nil
}

// measure runs the trainer on g GPUs spread over nodes (whole nodes first) and times its reports.
func measure(ctx context.Context, rt executor.Runtime, nodes []cloud.Node, name string, command []string, env map[string]string, params map[string]any, g, iters int, scale float64) (mean, std, startup float64, err error) {
	id := fmt.Sprintf("profile-%dgpu-%d", g, time.Now().UnixNano())
	gang := executor.Gang{Trial: id, Command: command, Env: env}
	for r := range g {
		node := nodes[min(r/max(nodes[0].GPUs, 1), len(nodes)-1)]
		local := r % max(node.GPUs, 1)
		gang.Workers = append(gang.Workers, executor.Worker{Node: node, Env: trial.Env{TrialID: id, Experiment: name, Params: params,
			TargetIter: iters, Rank: r, WorldSize: g, LocalRank: local, MasterAddr: nodes[0].Addr, GPUs: []int{local}}})
	}
	// As many gangs side by side as fit on the node, as a stage runs them: launching several
	// at once costs more than launching one.
	side := max(1, nodes[0].GPUs/g)
	type result struct {
		at     []time.Time
		exited time.Time
		err    error
	}
	// round launches the gangs side by side and collects them; the first round on fresh nodes
	// is a warm-up (a node's first jobs pay one-time costs later launches do not), not measured.
	round := func(tag string) (time.Time, []result) {
		results := make(chan result, side)
		start := time.Now()
		for k := range side {
			gk := gang
			gk.Trial = fmt.Sprintf("%s-%s%d", gang.Trial, tag, k)
			gk.Workers = append([]executor.Worker(nil), gang.Workers...)
			for i := range gk.Workers {
				gk.Workers[i].Env.TrialID = gk.Trial
			}
			go func() {
				h, err := rt.Launch(ctx, gk)
				if err != nil {
					results <- result{err: err}
					return
				}
				var r result
				for rep := range h.Reports() {
					r.at = append(r.at, rep.At)
				}
				<-h.Exited()
				r.exited = time.Now()
				r.err = h.Wait()
				results <- r
			}()
		}
		out := make([]result, 0, side)
		for range side {
			out = append(out, <-results)
		}
		return start, out
	}
	if _, warm := round("warmup-"); len(warm) > 0 && warm[0].err != nil {
		return 0, 0, 0, warm[0].err
	}
	start, measured := round("")
	results := make(chan result, len(measured))
	for _, r := range measured {
		results <- r
	}
	var d []float64
	var runs []result
	for range side {
		r := <-results
		if r.err != nil {
			return 0, 0, 0, r.err
		}
		if len(r.at) < 2 {
			return 0, 0, 0, fmt.Errorf("the trainer reported %d time(s); need one per iteration", len(r.at))
		}
		for i := 1; i < len(r.at); i++ {
			d = append(d, r.at[i].Sub(r.at[i-1]).Seconds()/scale)
		}
		runs = append(runs, r)
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
	// A TRAIN run costs startup + iterations. What it takes beyond its iterations, as the runtime
	// has it, is before the first report less one iteration, plus from the last report to the
	// gang's exit being seen. (Subtracting n mean iterations from the whole run instead would
	// carry all n iterations' noise into the estimate.)
	for _, r := range runs {
		head := r.at[0].Sub(start).Seconds()/scale - mean
		tail := r.exited.Sub(r.at[len(r.at)-1]).Seconds() / scale
		startup += max(0, head+tail)
	}
	startup /= float64(len(runs))
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
