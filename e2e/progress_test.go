package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A job too big to plan is refused at once, saying what to change; whatif says so per point.
// Its iterations are lognormal, so short chains of trials are not normal: its stages are drawn
// trial by trial (a normal profile plans at any size: TestMillionTrialsPlan).
func TestTooBigToPlan(t *testing.T) {
	t.Parallel()
	specFile := millionTrials(t, "", "lognormal, mean: 1, std: 0.2", 200)
	start := time.Now()
	for _, cmd := range []string{"plan", "run"} {
		_, errOut, code := rb(t, cmd, specFile, "--state", filepath.Join(t.TempDir(), "state"))
		if cmd == "plan" {
			_, errOut, code = rb(t, cmd, specFile)
		}
		if code != 2 || !strings.Contains(errOut, "too big to plan") || !strings.Contains(errOut, "lower planner.samples to 27 or fewer") {
			t.Errorf("%s: exit %d: %s", cmd, code, errOut)
		}
	}
	out, _, code := rb(t, "whatif", specFile, "--sweep", "deadline=50h,100h", "--planners", "greedy")
	if code != 0 || strings.Count(out, "too big to plan") != 2 {
		t.Errorf("whatif: exit %d:\n%s", code, out)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("refusing took %s", d)
	}
}

// A million trials whose chains are normal plan: each stage is drawn by its slowest chain, not
// trial by trial.
func TestMillionTrialsPlan(t *testing.T) {
	t.Parallel()
	specFile := millionTrials(t, ", init_latency: {dist: lognormal, mean: 60, std: 20}", "normal, mean: 1, std: 0.1", 100)
	out, errOut, code := rb(t, "plan", specFile, "-o", "json")
	if code != 0 || !strings.Contains(out, `"stages"`) {
		t.Fatalf("plan: exit %d: %s%s", code, errOut, out)
	}
}

// millionTrials writes a spec of SHA over a million trials: its cluster's extra fields, its
// iterations' distribution and its samples.
func millionTrials(t *testing.T, cluster, iter string, samples int) string {
	specFile := filepath.Join(t.TempDir(), "million.yaml")
	text := fmt.Sprintf(`name: million
deadline: 100h
objective: {metric: score}
algorithm: {sha: {trials: 1000000, min_iters: 1, max_iters: 27, eta: 3}}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [rubberband, trainer, synthetic]}
cluster: {gpus_per_node: 8, price_per_hour: 8, max_nodes: 64%s}
profile: {iter_latency: {1: {dist: %s}}}
planner: {samples: %d}
`, cluster, iter, samples)
	if err := os.WriteFile(specFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return specFile
}
