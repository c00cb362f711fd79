package planner_test

import (
	"context"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// ashaAtScale is an ASHA job of 1,000 trials on the paper's rungs (the planning-speed
// figure: under 2 s).
const ashaAtScale = `
name: asha-1000
deadline: 12h
seed: 1
objective: {metric: val_accuracy, mode: max}
algorithm: {asha: {trials: 1000, min_iters: 1, max_iters: 50, eta: 3}}
search_space: {lr: {type: loguniform, min: 1.0e-4, max: 1.0}}
cluster:
  gpus_per_node: 4
  price_per_hour: 12.24
  scale_latency: {value: 15s}
  init_latency: {value: 15s}
  max_nodes: 8
profile:
  iter_latency: {1: {mean: 38, std: 1.5}}
  startup_latency: {value: 12s}
planner: {samples: 100, deadline_quantile: 0.5}
`

func BenchmarkPlanASHA1000(b *testing.B) {
	exp, err := spec.Parse("asha-1000.yaml", []byte(ashaAtScale), nil)
	if err != nil {
		b.Fatal(err)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := planner.PlanASHA(context.Background(), exp, m); err != nil {
			b.Fatal(err)
		}
	}
}

// The paper's Table 2 job as ASHA (its ResNet101 profile on p3.8xlarge) grown to 1,000 trials,
// at a 12-hour deadline: the planning-speed figure on a measured profile.
func BenchmarkPlanASHATable2At1000(b *testing.B) {
	exp, err := spec.Load("../examples/paper/table2-asha.yaml")
	if err != nil {
		b.Fatal(err)
	}
	exp.Algorithm.ASHA.Trials = 1000
	exp.Deadline = spec.Duration(12 * time.Hour)
	m, err := sim.NewModel(exp)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		res, err := planner.PlanASHA(context.Background(), exp, m)
		if err != nil || !res.Elastic.Feasible {
			b.Fatalf("%v: %+v", err, res)
		}
	}
}
