package driver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/profiler"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A Profiling is what `rubberband profile` measures: the spec's trainer (on the instance type
// to measure) on backend, at each of GPUs, Iters iterations a measurement and Rounds measured
// rounds after a warm-up, what is measured divided by TimeScale. FirstWave is how many gangs the
// cold round launches at once on the local backend (0: the first stage's widest wave).
type Profiling struct {
	Backend       string
	Spec          *spec.Experiment
	GPUs          []int
	Iters, Rounds int
	TimeScale     float64
	FirstWave     int
}

// Profile measures p with scratch state of its own, saying each point on log as it is
// measured, and returns the profile's file: its figures, and notes on where, when and how they
// were measured.
func Profile(ctx context.Context, p Profiling, log io.Writer) ([]byte, error) {
	exp := p.Spec
	tmp, err := os.MkdirTemp("", "rubberband-profile-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	backend, scratch, err := OpenProfiling(ctx, p.Backend, exp, tmp, p.TimeScale, p.GPUs, log)
	if err != nil {
		return nil, err
	}
	defer backend.Close() // reused trainer processes (trainer.reuse) end with the profile
	if backend.Kind.SharesNoDisk {
		fmt.Fprintf(log, "profiling on EC2 %s instances (its scratch checkpoints are under %s)\n", exp.Cluster.InstanceType, scratch.Checkpoints.URL)
	}
	cfg := profiler.Config{Experiment: scratch, Runtime: backend.Runtime, Provider: backend.Provider, GPUs: p.GPUs, Iters: p.Iters, TimeScale: p.TimeScale,
		Rounds: p.Rounds, Measured: func(p profiler.Point) {
			contention := ""
			if p.Queued > 0 {
				contention = fmt.Sprintf(", %d launches at once each %.3f s after the last", p.Queued, p.Contention)
			}
			fmt.Fprintf(log, "%s: %.4f s per iteration (std %.4f), start-up %.3f s (median of %d launches, the slowest %.3f s), launch overhead %.3f s, first-stage lag %.3f s%s\n",
				format.Plural(p.GPUs, "GPU"), p.Mean, p.Std, p.Startup, len(p.Startups), slices.Max(append([]float64{p.Startup}, p.Startups...)), p.Overhead, p.Lag, contention)
		}}
	if backend.Kind.LocalTrainers {
		cfg.FirstWave = profiler.FirstWave(exp)
		if p.FirstWave > 0 {
			cfg.FirstWave = p.FirstWave
		}
	}
	prof, err := profiler.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	notes := fmt.Sprintf("measured by `rubberband profile` on %s, %s, %d iterations per GPU count", hostname(), time.Now().UTC().Format("2006-01-02"), p.Iters)
	if typ := exp.Cluster.InstanceType; typ != "" {
		notes += fmt.Sprintf(", for instance type %s (%s per node)", typ, format.Plural(exp.Cluster.GPUsPerNode, "GPU"))
	}
	if err := prof.Write(&buf, notes); err != nil {
		return nil, err
	}
	if len(prof.NodeScale) > 0 {
		fmt.Fprintf(log, "node start-up: request to running %s s (%s), running to ready for trials %s s (%s); the profile file notes both\n",
			profiler.Seconds(prof.NodeScale), profiler.ScaleLatencyField, profiler.Seconds(prof.NodeInit), profiler.InitLatencyField)
	}
	return buf.Bytes(), nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "this machine"
	}
	return h
}
