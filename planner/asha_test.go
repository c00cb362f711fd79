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

// Where stragglers hold SHA's barriers (examples/asha-stragglers.yaml: a tenth of the nodes four
// times slower), the elastic ASHA schedule costs no more than the synchronous SHA plan at the
// same deadline and ends in well under its time; without the stragglers SHA is the cheaper, so
// it is the barriers that ASHA wins on.
func TestASHABeatsSHAWhereStragglersHoldABarrier(t *testing.T) {
	plan := func(slow bool) *ASHAResult {
		exp, err := spec.Load("../examples/asha-stragglers.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if !slow {
			exp.Profile.SlowNodes = spec.SlowNodes{}
		}
		m, err := sim.NewModel(exp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := PlanASHA(context.Background(), exp, m)
		if err != nil || res.SHA == nil {
			t.Fatalf("plan: %v", err)
		}
		return res
	}
	slow, calm := plan(true), plan(false)
	for _, r := range []*ASHAResult{slow, calm} {
		t.Logf("asha %v: %.0f s, $%.2f; sha: %.0f s, $%.2f", r.Elastic.Plan, r.Elastic.JCT.Mean, r.Elastic.Cost.Mean, r.SHA.Predicted.JCT.Mean, r.SHA.Predicted.Cost.Mean)
	}
	e, s := slow.Elastic, slow.SHA.Predicted
	if e.Cost.Mean > 1.01*s.Cost.Mean || e.JCT.Mean > 0.5*s.JCT.Mean {
		t.Fatalf("with stragglers asha %.0f s, $%.2f against sha's %.0f s, $%.2f", e.JCT.Mean, e.Cost.Mean, s.JCT.Mean, s.Cost.Mean)
	}
	if calm.Elastic.Cost.Mean < calm.SHA.Predicted.Cost.Mean {
		t.Fatalf("without stragglers asha $%.2f is cheaper than sha's $%.2f: the job does not test the barrier", calm.Elastic.Cost.Mean, calm.SHA.Predicted.Cost.Mean)
	}
}

// The greedy descent checked by the exact planner on small jobs: planner optimal enumerates every
// schedule on the same common random numbers, so it is never dearer than greedy; greedy lands
// within 5% of it. A job with too many schedules is refused by name.
func TestASHAGreedyAgainstExact(t *testing.T) {
	for _, file := range []string{"../examples/asha-quickstart.yaml", "../examples/asha-replan.yaml", "../executor/virtual/testdata/asha-calibration.yaml"} {
		exp, err := spec.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		exp.Planner.Samples = 100 // both on the same common random numbers, fewer of them
		m, err := sim.NewModel(exp)
		if err != nil {
			t.Fatal(err)
		}
		greedy, err := PlanASHA(context.Background(), exp, m)
		if err != nil {
			t.Fatal(err)
		}
		exp.Planner.Name = spec.PlannerOptimal
		exact, err := PlanASHA(context.Background(), exp, m)
		if err != nil {
			t.Fatal(err)
		}
		g, e := greedy.Elastic, exact.Elastic
		t.Logf("%s: greedy %v $%.4f (%d schedules), exact %v $%.4f (%d schedules)", exp.Name, g.Plan, g.Cost.Mean, greedy.Evaluated, e.Plan, e.Cost.Mean, exact.Evaluated)
		if !g.Feasible || !e.Feasible || e.Cost.Mean > g.Cost.Mean+1e-12 || g.Cost.Mean > 1.05*e.Cost.Mean {
			t.Fatalf("%s: greedy %v $%.4f (feasible %v), exact %v $%.4f (feasible %v)", exp.Name, g.Plan, g.Cost.Mean, g.Feasible, e.Plan, e.Cost.Mean, e.Feasible)
		}
		if exact.Fixed.Cost != greedy.Fixed.Cost {
			t.Fatalf("%s: the best fixed count differs: %v against %v", exp.Name, exact.Fixed.Plan, greedy.Fixed.Plan)
		}
	}
	exp, err := spec.Load("../examples/asha-stragglers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exp.Planner.Name = spec.PlannerOptimal
	m, _ := sim.NewModel(exp)
	if _, err := PlanASHA(context.Background(), exp, m); err == nil || !strings.Contains(err.Error(), "use greedy") {
		t.Fatalf("a job of 52,360 schedules planned exactly: %v", err)
	}
}
