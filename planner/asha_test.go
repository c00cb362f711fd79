package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The paper's Table 2 job as ASHA at a two-hour deadline: the elastic schedule meets the
// deadline, costs at most 0.7 of the cheapest fixed number of GPUs that meets it, starts with no
// fewer GPUs than it ends with, and the synchronous SHA plan is priced beside them. The same
// spec plans the same schedule twice.
func TestPlanASHAOnTable2(t *testing.T) {
	exp, err := spec.Load("../examples/paper/table2-asha.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	res, err := PlanASHA(context.Background(), exp, m)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	res.WriteTable(&table)
	t.Logf("\n%s", table.String())
	e, f := res.Elastic, res.Fixed
	if !e.Feasible || !f.Feasible || e.Cost.Mean > 0.7*f.Cost.Mean || len(f.Plan.GPUs) != 1 {
		t.Fatalf("elastic %v $%.2f (feasible %v); fixed %v $%.2f (feasible %v)", e.Plan, e.Cost.Mean, e.Feasible, f.Plan, f.Cost.Mean, f.Feasible)
	}
	g := e.Plan.GPUs
	if g[0] < g[len(g)-1] || g[0]%m.GPUsPerNode != 0 {
		t.Fatalf("schedule %v", g)
	}
	if res.SHA == nil || !(res.SHA.Predicted.Cost.Mean > 0) {
		t.Fatal("no synchronous SHA plan beside it")
	}
	again, _ := PlanASHA(context.Background(), exp, m)
	if again.Elastic.Plan.String() != e.Plan.String() || again.Elastic.Cost != e.Cost {
		t.Fatal("the same spec planned another schedule")
	}
}
