package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// BenchmarkPlanFig12 plans the paper's Fig. 12 job, SHA(512, 4, 4096, eta 2) on p3.8xlarge with
// 1 s initialisation and a 90-minute deadline, with 100 samples per candidate, from a cold
// simulator (every stage sample drawn afresh) as `rubberband plan` does.
func BenchmarkPlanFig12(b *testing.B) { benchPlan(b, "../examples/paper/fig12-init1s.yaml") }

// BenchmarkPlanFig12Types plans the same job with three instance types (p3.2xlarge, p3.8xlarge,
// p3.16xlarge) in two markets (on-demand, spot): six offers per stage.
func BenchmarkPlanFig12Types(b *testing.B) { benchPlan(b, "../examples/paper/fig12-types.yaml") }

// benchPlan plans a spec with static, greedy and optimal, 100 samples, at its deadline at p50.
func benchPlan(b *testing.B, file string) {
	exp, m := loadModel(b, file)
	for _, name := range []string{spec.PlannerStatic, spec.PlannerGreedy, spec.PlannerOptimal} {
		b.Run(name, func(b *testing.B) {
			evaluated := 0
			for b.Loop() {
				p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), 100, exp.Seed), exp.Deadline.Seconds(), 0.5)
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(p, name)
				if err != nil || !res.Feasible {
					b.Fatalf("%s: feasible %v, %v", name, res.Feasible, err)
				}
				evaluated = res.Evaluated
			}
			b.ReportMetric(float64(evaluated), "plans/op")
		})
	}
}

// loadModel loads a spec file and builds its model.
func loadModel(t testing.TB, file string) (*spec.Experiment, *sim.Model) {
	t.Helper()
	exp, err := spec.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	return exp, m
}

// BenchmarkPlanScale plans SHA(N, 1 to 729 iterations, eta 3) of ResNet-50 (batch 512) on
// p3.8xlarge with greedy and 100 samples, from a cold simulator, for the trial counts
// RB_BENCH_PLAN_TRIALS lists (default 64 to 100,000: issue 22's table, where 32,768 trials took
// over ten minutes before stages were drawn by their slowest chains; RB_BENCH_PLAN_TRIALS=1000000
// adds the million, about 9 s and 1 GB).
func BenchmarkPlanScale(b *testing.B) {
	counts := os.Getenv("RB_BENCH_PLAN_TRIALS")
	if counts == "" {
		counts = "64,512,4096,32768,100000"
	}
	profile, err := filepath.Abs("../examples/paper/profiles/resnet50-b512-p3.8xlarge.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range strings.Split(counts, ",") {
		b.Run("trials="+n, func(b *testing.B) {
			file := filepath.Join(b.TempDir(), "scale.yaml")
			text := fmt.Sprintf(`name: scale
deadline: 2h
seed: 1
objective: {metric: val_accuracy, mode: max}
algorithm: {sha: {trials: %s, min_iters: 1, max_iters: 729, eta: 3}}
cluster: {instance_type: p3.8xlarge, max_nodes: 4096}
profile: {file: %s}
`, n, profile)
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				b.Fatal(err)
			}
			exp, m := loadModel(b, file)
			evaluated := 0
			for b.Loop() {
				p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), 100, exp.Seed), exp.Deadline.Seconds(), 0.5)
				if err != nil {
					b.Fatal(err)
				}
				res, err := Run(p, spec.PlannerGreedy)
				if err != nil || !res.Feasible {
					b.Fatalf("greedy: feasible %v, %v", res.Feasible, err)
				}
				evaluated = res.Evaluated
			}
			b.ReportMetric(float64(evaluated), "plans/op")
		})
	}
}

// BenchmarkPlanHyperband plans Hyperband(1, 81, 3) (examples/hyperband-81.yaml: five brackets on
// one cluster of up to 48 nodes) with greedy and the joint optimal planner at deadlines from the
// tightest it meets to a loose one, 100 samples at p90, from a cold simulator; it reports
// greedy's predicted cost over the optimal one's (greedy/optimal, 1 is as cheap).
func BenchmarkPlanHyperband(b *testing.B) {
	exp, m := loadModel(b, "../examples/hyperband-81.yaml")
	for _, minutes := range []float64{11.7, 12, 13, 16, 20, 25} {
		b.Run(fmt.Sprintf("deadline=%gm", minutes), func(b *testing.B) {
			costs := map[string]float64{}
			for _, name := range []string{spec.PlannerGreedy, spec.PlannerOptimal} {
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), 100, exp.Seed), minutes*60, 0.9)
						if err != nil {
							b.Fatal(err)
						}
						res, err := Run(p, name)
						if err != nil || !res.Feasible {
							b.Fatalf("%s: feasible %v, %v", name, res.Feasible, err)
						}
						costs[name] = res.Best.Cost
						b.ReportMetric(float64(res.Evaluated), "plans/op")
					}
					if name == spec.PlannerOptimal {
						b.ReportMetric(costs[spec.PlannerGreedy]/costs[spec.PlannerOptimal], "greedy/optimal")
					}
				})
			}
		})
	}
}
