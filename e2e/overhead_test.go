package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkOverhead runs many one-iteration trials of the synthetic trainer through the real
// executor, local provider and process runtime, on 64 single-GPU slots:
//   - zero: near-zero iteration time (1 ms): the time is all overhead, per trial and slot;
//   - 1s: one-second trials, against the ideal JCT (waves x 1 s), Ray Tune's published setting;
//
// each with a process per launch, and with trainer.reuse (-reuse: one process per slot serves
// trial after trial, as Ray Tune's reuse_actors does); and 1s-reuse-tpe, where every trial's
// configuration is drawn by TPE at its launch from all the results before it (the driver's
// sampling overhead, against 1s-reuse's random draws made at the start).
//
// RB_BENCH_TRIALS sets the trial count (default 10000 for zero, a fifth of it for 1s).
func BenchmarkOverhead(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("RB_BENCH_TRIALS")); err == nil && v > 0 {
		n = v
	}
	const slots = 64
	for _, c := range []struct {
		name   string
		trials int
		iter   float64
		reuse  bool
		tpe    bool
	}{{"zero", n, 0.001, false, false}, {"1s", max(n/5, slots), 1, false, false}, {"zero-reuse", n, 0.001, true, false},
		{"1s-reuse", max(n/5, slots), 1, true, false}, {"1s-reuse-tpe", max(n/5, slots), 1, true, true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				dir := b.TempDir()
				specFile := filepath.Join(dir, "overhead.yaml")
				sampler := "random"
				if c.tpe {
					sampler = "tpe"
				}
				os.WriteFile(specFile, []byte(fmt.Sprintf(`name: overhead
sampler: {name: %s}
deadline: 100h
objective: {metric: score}
algorithm: {stages: [{trials: %d, iters: 1}]}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [rubberband, trainer, synthetic, --spec, %s], reuse: %t}
cluster: {gpus_per_node: 8, price_per_hour: 8, max_nodes: 8}
profile: {iter_latency: {1: {dist: constant, value: %g}}}
`, sampler, c.trials, specFile, c.reuse, c.iter)), 0o644)
				plan := planFile(b, dir, specFile, strconv.Itoa(slots))
				start := time.Now()
				state := filepath.Join(dir, "state")
				if _, errOut, code := rbTimed(b, "run", specFile, "--plan", plan, "--state", state); code != 0 {
					b.Fatal(errOut)
				}
				wall := time.Since(start).Seconds()
				jct := readRunReport(b, state).Realized.JCT // the run itself, without the CLI's start and end
				waves := (c.trials + slots - 1) / slots
				ideal := float64(waves) * c.iter
				b.ReportMetric(1000*(jct*slots/float64(c.trials)-c.iter), "overhead-ms/trial")
				b.ReportMetric(100*(jct-ideal)/ideal, "%-over-ideal")
				b.ReportMetric(100*(wall-ideal)/ideal, "%-wall-over-ideal")
				b.ReportMetric(float64(c.trials)/jct, "trials/s")
			}
		})
	}
}
