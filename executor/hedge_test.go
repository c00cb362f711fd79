package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The executor runs hedged stages of Successive Halving and Hyperband: their plans are taken,
// and the run's model (its re-plans at syncs) may hedge. ASHA's cluster is one market: a hedged
// plan given to it is refused before anything is rented.
func TestRunTakesHedgedPlans(t *testing.T) {
	const cluster = `cluster: {instance_type: p3.8xlarge, markets: [on-demand, spot], spot: {discount: 0.7, interruptions_per_hour: 5}}
profile: {iter_latency: {1: {mean: 1}}}
`
	exp, err := spec.Parse("t.yaml", []byte("name: hedge\nobjective: {metric: acc}\nalgorithm: {stages: [{trials: 2, iters: 1}]}\n"+cluster), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Cluster.Hedges() {
		t.Fatal("the spec does not hedge")
	}
	x, err := newRun(Config{Experiment: exp, Alloc: sim.Alloc{{{GPUs: 2, Nodes: 2, Market: spec.MarketSpot, OnDemand: 1}}}})
	if err != nil {
		t.Fatalf("a hedged plan: %v", err)
	}
	if !x.model.Hedge {
		t.Error("the run's model does not hedge: its re-plans would keep one market")
	}
	asha, err := spec.Parse("t.yaml", []byte("name: hedge\nobjective: {metric: acc}\nalgorithm: {asha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n"+cluster), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Config{Experiment: asha, Alloc: sim.Alloc{{{GPUs: 2, Nodes: 2, Market: spec.MarketSpot, OnDemand: 1}}}})
	if !errors.Is(err, runstate.ErrHedged) {
		t.Fatalf("ASHA given a hedged plan: %v", err)
	}
}
