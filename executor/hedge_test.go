package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The executor does not run hedged stages yet: a plan with one is refused before anything is
// rented, and the run's model (its re-plans) never hedges.
func TestRunRefusesHedgedPlan(t *testing.T) {
	src := `name: hedge
objective: {metric: acc}
algorithm: {stages: [{trials: 2, iters: 1}]}
cluster: {instance_type: p3.8xlarge, markets: [on-demand, spot], spot: {discount: 0.7, interruptions_per_hour: 5}}
profile: {iter_latency: {1: {mean: 1}}}
`
	exp, err := spec.Parse("t.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Cluster.Hedges() {
		t.Fatal("the spec does not hedge")
	}
	_, err = Run(context.Background(), Config{Experiment: exp, Alloc: sim.Alloc{{{GPUs: 8, Nodes: 2, Market: spec.MarketSpot, OnDemand: 1}}}})
	if !errors.Is(err, ErrHedged) {
		t.Fatalf("a hedged plan: %v", err)
	}
	x, err := newRun(Config{Experiment: exp, Alloc: sim.Alloc{{{GPUs: 2, Nodes: 1, Market: spec.MarketSpot}}}})
	if err != nil {
		t.Fatal(err)
	}
	if x.model.Hedge {
		t.Error("the run's model hedges: its re-plans would")
	}
}
