package planner

import (
	"fmt"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// fig11Job is SHA(trials, 1 to maxIters iterations, eta 3) of ResNet-50 (batch 512) on
// p3.8xlarge, nodes ready at once (examples/paper/profiles/resnet50-b512-p3.8xlarge.yaml
// inline): the job of issue 39's scale runs.
func fig11Job(trials, maxIters, maxNodes int) string {
	return fmt.Sprintf(`name: fig11
seed: 1
objective: {metric: val_accuracy}
algorithm: {sha: {trials: %d, min_iters: 1, max_iters: %d, eta: 3}}
cluster: {instance_type: p3.8xlarge, max_nodes: %d, scale_latency: {value: 0s}, init_latency: {value: 0s}}
profile:
  iter_latency:
    1: {mean: 4.000, std: 0.128}
    2: {mean: 2.026, std: 0.208}
    4: {mean: 1.081, std: 0.136}
    8: {mean: 1.020, std: 0.129}
    16: {mean: 0.990, std: 0.125}
  startup_latency: {value: 0s}
`, trials, maxIters, maxNodes)
}

// Greedy stays within 1% of the exact planner's cost, at the same deadline quantile, on the
// Fig. 11 job where the paper's descent alone was several percent off (30 samples, p50):
//   - a loose deadline, where the best static cluster (one node: 4 GPUs, no option of 243
//     trials, so no step from it) beat every descent: 4% dearer than 27 GPUs a stage;
//   - two stages on the same 61 nodes, each dearer moved alone (the nodes it starts or releases
//     for the other pay a billing minimum): 6.5% dearer than both on 21 nodes;
//   - a tight deadline, where the first stage gets cheaper only if a later one gets faster:
//     15% dearer than the trade.
func TestGreedyNearExact(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		trials, maxIters, maxNode int
		deadline                  float64
	}{
		{"static start", 243, 81, 64, 1500},
		{"same-node run", 729, 81, 64, 175},
		{"trade", 1024, 243, 256, 282},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := problem(t, fig11Job(tc.trials, tc.maxIters, tc.maxNode), tc.deadline, 0.5, 30)
			gr, op := Greedy(p), Optimal(p)
			if !op.Feasible || !op.Exact {
				t.Fatalf("optimal: feasible %v, exact %v", op.Feasible, op.Exact)
			}
			if !gr.Feasible || gr.Best.Cost > 1.01*op.Best.Cost {
				t.Errorf("greedy: feasible %v, $%.4f (%v); optimal $%.4f (%v): %.2f%% dearer",
					gr.Feasible, gr.Best.Cost, gr.Best.Alloc, op.Best.Cost, op.Best.Alloc, 100*(gr.Best.Cost/op.Best.Cost-1))
			}
		})
	}
}

// BenchmarkGreedyVsExact plans the Fig. 11 job of issue 39 (1 to 729 iterations, a 6 h
// deadline at p50, up to 256 nodes, 100 samples) at 1,024 to 100,000 trials with greedy and the
// exact planner, from a cold simulator each time, and reports greedy's predicted cost over the
// exact one's less one, in percent (gap-%: 0 is as cheap).
func BenchmarkGreedyVsExact(b *testing.B) {
	for _, trials := range []int{1024, 4096, 16384, 32768, 100000} {
		b.Run(fmt.Sprintf("trials=%d", trials), func(b *testing.B) {
			src := fig11Job(trials, 729, 256)
			cost := map[string]float64{}
			for _, name := range []string{spec.PlannerGreedy, spec.PlannerOptimal} {
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						p := problem(b, src, 6*3600, 0.5, 100)
						res, err := Run(p, name)
						if err != nil || !res.Feasible {
							b.Fatalf("%s: feasible %v, %v", name, res.Feasible, err)
						}
						cost[name] = res.Best.Cost
						b.ReportMetric(float64(res.Evaluated), "plans/op")
					}
					if name == spec.PlannerOptimal {
						b.ReportMetric(100*(cost[spec.PlannerGreedy]/cost[spec.PlannerOptimal]-1), "gap-%")
					}
				})
			}
		})
	}
}
