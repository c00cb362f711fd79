package sim

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// BenchmarkCriticalPath measures the simulator's throughput in DAG node-samples per second: one
// Monte Carlo sample of the whole Fig. 12 job DAG (Algorithm 1) per iteration.
func BenchmarkCriticalPath(b *testing.B) {
	exp, err := spec.Load("../examples/paper/fig12-init1s.yaml")
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewModel(exp)
	if err != nil {
		b.Fatal(err)
	}
	brackets := exp.Algorithm.Brackets()
	// A plan with waves, wide trials and scale-ups: 128 GPUs, then 4 GPUs per trial.
	gpus := [][]int{{128, 256, 256, 256, 128, 64, 32, 16, 8, 4}}
	g, err := BuildDAG(m, brackets, m.Elastic(gpus))
	if err != nil {
		b.Fatal(err)
	}
	r := spec.NewRand(1, 1)
	finish := make([]float64, len(g.Nodes))
	for b.Loop() {
		g.CriticalPath(m, r, finish, nil)
	}
	b.ReportMetric(float64(len(g.Nodes))*float64(b.N)/b.Elapsed().Seconds(), "node-samples/s")
}

// BenchmarkEvaluate measures evaluating one plan of the Fig. 12 job with 100 samples once its
// stage samples are cached: the inner loop of every planner.
func BenchmarkEvaluate(b *testing.B) {
	exp, err := spec.Load("../examples/paper/fig12-init1s.yaml")
	if err != nil {
		b.Fatal(err)
	}
	m, _ := NewModel(exp)
	s := New(m, exp.Algorithm.Brackets(), 100, 1)
	a := m.Elastic([][]int{{128, 256, 256, 256, 128, 64, 32, 16, 8, 4}})
	s.Evaluate(a)
	for b.Loop() {
		s.Evaluate(a)
	}
}

// BenchmarkSimulate measures one full prediction of a Fig. 12 plan with 100 samples and its
// per-stage breakdown (what plan, run and simulate print), draws cached.
func BenchmarkSimulate(b *testing.B) {
	exp, err := spec.Load("../examples/paper/fig12-init1s.yaml")
	if err != nil {
		b.Fatal(err)
	}
	m, _ := NewModel(exp)
	s := New(m, exp.Algorithm.Brackets(), 100, 1)
	a := m.Elastic([][]int{{128, 256, 256, 256, 128, 64, 32, 16, 8, 4}})
	if _, err := s.Simulate(a); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s.Simulate(a)
	}
}
