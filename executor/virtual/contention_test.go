package virtual_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/virtual"
)

// Start-up contention as the executor meets it: on constant latencies the unchanged executor in
// the virtual world, whose launches at one moment queue behind each other (0.25 s apiece),
// realizes stage by stage what the simulator predicts, and 0.25 s more than without contention
// in every stage of two launches at once (the hand-worked job of sim's
// TestStartupContentionByHand: 12.25 s and 5.25 s); given by GPU count, the launches' own (one
// GPU each here: a wider count's 5 s must not be paid).
func TestStartupContentionAsTheModelHasIt(t *testing.T) {
	for _, c := range []struct {
		contention string
		stages     []float64
	}{{"0s", []float64{12, 5}}, {"0.25s", []float64{12.25, 5.25}}, {"{1: 0.25s, 2: 5s}", []float64{12.25, 5.25}}} {
		path := filepath.Join(t.TempDir(), "contention.yaml")
		os.WriteFile(path, []byte(`name: contention
deadline: 1h
objective: {metric: loss, mode: min}
algorithm: {stages: [{trials: 4, iters: 2}, {trials: 2, iters: 3}]}
search_space: {lr: {type: loguniform, min: 1.0e-5, max: 1}}
cluster: {gpus_per_node: 2, price_per_hour: 3.6, billing: {minimum: 0s}, scale_latency: {value: 3s}, init_latency: {value: 1s}, max_nodes: 1}
profile: {iter_latency: {1: {value: 1}, 2: {value: 0.6}}, startup_latency: {value: 2s}, startup_contention: `+c.contention+`}
`), 0o644)
		exp, s := load(t, path)
		alloc := s.Model().Elastic([][]int{{2, 2}})
		pred, err := s.Simulate(alloc)
		if err != nil {
			t.Fatal(err)
		}
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: filepath.Join(t.TempDir(), "j.jsonl"), RunID: "contention"})
		if err != nil || !out.Result.Finished {
			t.Fatalf("contention %s: %v", c.contention, err)
		}
		for k, want := range c.stages {
			p, r := pred.Brackets[0].Stages[k], out.Result.Brackets[0].Stages[k]
			if math.Abs(p.Duration-want) > 1e-9 || math.Abs(r.Duration-want) > 1e-3 || math.Abs(r.Cost-p.Cost) > 1e-9 {
				t.Errorf("contention %s, stage %d: predicted %.3f s $%.4f, realized %.3f s $%.4f; by hand %.2f s", c.contention, k+1, p.Duration, p.Cost, r.Duration, r.Cost, want)
			}
		}
	}
}
