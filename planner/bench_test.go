package planner

import (
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
