package planner

import (
	"fmt"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// A spec naming one type of each GPU family the catalog gained plans, at the type's catalog
// price: the row reaches the planner whole.
func TestPlanNewCatalogFamilies(t *testing.T) {
	for _, name := range []string{"g4dn.xlarge", "g5.xlarge", "g6.xlarge", "g6e.xlarge", "p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge"} {
		it, ok := spec.LookupInstance(name)
		if !ok {
			t.Fatalf("%s is not in the catalog", name)
		}
		src := fmt.Sprintf(`name: x
deadline: 1h
objective: {metric: m}
algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}
cluster: {instance_type: %s, max_nodes: 4}
profile: {iter_latency: {1: {mean: 1}}}
planner: {samples: 8}
`, name)
		exp, err := spec.Parse("a.yaml", []byte(src), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep, res, err := PlanSpec(t.Context(), exp)
		if err != nil || !res.Feasible {
			t.Fatalf("%s: %v (feasible %v)", name, err, res != nil && res.Feasible)
		}
		if rep.Cluster.PricePerHour != it.PricePerHour || rep.Cluster.GPUsPerNode != it.GPUs || !(rep.Predicted.Cost.Mean > 0) {
			t.Errorf("%s: cluster %+v, cost %v; want the catalog's %v $/h and %d GPUs", name, rep.Cluster, rep.Predicted.Cost.Mean, it.PricePerHour, it.GPUs)
		}
	}
}
