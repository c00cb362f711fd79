package virtual_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// plan loads a spec and plans it as `rubberband plan` does.
func plan(t testing.TB, path string) (*spec.Experiment, sim.Alloc, *sim.Simulator) {
	t.Helper()
	exp, s := load(t, path)
	_, res, err := planner.Plan(context.Background(), exp, s, nil)
	if err != nil || res.Best.Alloc == nil {
		t.Fatalf("plan %s: %v", path, err)
	}
	return exp, res.Best.Alloc, s
}

// load loads a spec and its simulator.
func load(t testing.TB, path string) (*spec.Experiment, *sim.Simulator) {
	t.Helper()
	exp, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.For(exp)
	if err != nil {
		t.Fatal(err)
	}
	return exp, s
}

// The paper's Table 2 job runs through the unchanged executor in virtual time: it finishes, its
// JCT and cost over several worlds average what the plan predicts, every node is released and billed as the world
// billed it, and two runs write byte-identical journals.
func TestTable2InVirtualTime(t *testing.T) {
	exp, alloc, s := plan(t, "../../examples/paper/table2-resnet101.yaml")
	pred, err := s.Simulate(alloc)
	if err != nil {
		t.Fatal(err)
	}
	var journals [][]byte
	for i := range 2 {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: path, RunID: "virtual-test"})
		if err != nil {
			t.Fatal(err)
		}
		res := out.Result
		if !res.Finished || res.Best == nil {
			t.Fatalf("run %d: not finished: %+v", i, res)
		}
		if held := out.World.Held(); len(held) > 0 {
			t.Errorf("run %d: %d nodes left held", i, len(held))
		}
		if b := out.World.Breaches(); len(b) > 0 {
			t.Errorf("run %d: breaches: %s", i, strings.Join(b, "; "))
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		journals = append(journals, b)
		t.Logf("run %d: JCT %.0f s, cost $%.2f (predicted %.0f s, $%.2f), %d timers, best %s", i, res.Realized.JCT, res.Realized.Cost,
			pred.JCT.Mean, pred.Cost.Mean, out.Events, res.Best.Trial)
	}
	if !bytes.Equal(journals[0], journals[1]) {
		t.Fatalf("two runs of one seed wrote different journals")
	}
	// Runs in worlds of other seeds realize what was predicted, on average: one run may fall in
	// the prediction's tail (seed 1's plan, re-planned greedy's, realizes $23.34 against p95
	// $23.33), its mean over eight may not stray.
	var jct, cost float64
	const worlds = 8
	for seed := int64(1); seed <= worlds; seed++ {
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: filepath.Join(t.TempDir(), "journal.jsonl"), RunID: "virtual-test", Seed: seed})
		if err != nil || !out.Result.Finished {
			t.Fatalf("seed %d: %v", seed, err)
		}
		jct += out.Result.Realized.JCT / worlds
		cost += out.Result.Realized.Cost / worlds
	}
	if math.Abs(jct/pred.JCT.Mean-1) > 0.02 || math.Abs(cost/pred.Cost.Mean-1) > 0.02 {
		t.Errorf("realized over %d worlds: JCT %.0f s, cost $%.2f on average; predicted %.0f s, $%.2f (more than 2%% off)", worlds, jct, cost, pred.JCT.Mean, pred.Cost.Mean)
	}
	if events, err := journal.ReadJournal(filepath.Join(t.TempDir(), "none")); err != nil || len(events) != 0 {
		t.Fatal(err)
	}
}

// A cluster whose nodes start at once (no scale_latency, no init_latency) runs: its nodes are
// running when the request returns (a timer of 0 used to fire after Create looked, and the run
// failed with "a gang of 1 GPUs does not fit on 0 nodes").
func TestNodesThatStartAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zero.yaml")
	os.WriteFile(path, []byte(`name: zero-latency
deadline: 2h
objective: {metric: loss, mode: min}
algorithm: {hyperband: {min_iters: 1, max_iters: 9, eta: 3}}
search_space: {lr: {type: loguniform, min: 1.0e-5, max: 1}}
cluster: {gpus_per_node: 4, price_per_hour: 12.24, max_nodes: 8}
profile: {iter_latency: {1: {mean: 30, std: 3}}, startup_latency: {value: 5s}}
`), 0o644)
	exp, alloc, _ := plan(t, path)
	out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: filepath.Join(t.TempDir(), "j.jsonl"), RunID: "zero"})
	if err != nil || !out.Result.Finished || len(out.World.Held()) != 0 {
		t.Fatalf("run: %v", err)
	}
}
