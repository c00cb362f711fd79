package planner

import (
	"context"
	"os"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Facts the model guarantees, checked along sweeps of the paper's Table 2 job: the static plan
// never costs more as the deadline loosens; optimal <= greedy <= static at every point;
// per-function billing never costs more than per-instance.
func TestSweepMonotonicFacts(t *testing.T) {
	data, err := os.ReadFile("../examples/paper/table2-resnet101.yaml")
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) ([]byte, error) { return os.ReadFile("../examples/paper/" + p) }
	sweeps := []spec.Sweep{{Name: "deadline"}, {Name: "cluster.billing.model"}}
	deadlines, _ := spec.ParseSweep("deadline=18m..60m/6m")
	sweeps[0].Values = deadlines.Values
	sweeps[1].Values = []string{"per-instance", "per-function"}
	names := []string{spec.PlannerStatic, spec.PlannerGreedy, spec.PlannerOptimal}
	prevStatic := map[string]float64{}
	perInstance := map[string]map[string]Outcome{}
	for _, pt := range spec.Grid(sweeps) {
		exp, err := spec.ApplyPoint("table2.yaml", data, read, sweeps, pt)
		if err != nil {
			t.Fatal(err)
		}
		exp.Planner.Samples = 30
		res, err := Compare(context.Background(), exp, names)
		if err != nil {
			t.Fatal(err)
		}
		st, gr, op := res[spec.PlannerStatic], res[spec.PlannerGreedy], res[spec.PlannerOptimal]
		if st.Feasible {
			if prev, ok := prevStatic[pt[1]]; ok && st.Predicted.Cost.Mean > prev+1e-9 {
				t.Errorf("%v: static costs $%.2f, more than $%.2f at a tighter deadline", pt, st.Predicted.Cost.Mean, prev)
			}
			prevStatic[pt[1]] = st.Predicted.Cost.Mean
			if !gr.Feasible || !op.Feasible || op.Predicted.Cost.Mean > gr.Predicted.Cost.Mean+1e-9 || gr.Predicted.Cost.Mean > st.Predicted.Cost.Mean+1e-9 {
				t.Errorf("%v: static $%.2f greedy $%.2f optimal $%.2f", pt, st.Predicted.Cost.Mean, gr.Predicted.Cost.Mean, op.Predicted.Cost.Mean)
			}
		}
		if pt[1] == "per-instance" {
			perInstance[pt[0]] = res
		} else if pi, ok := perInstance[pt[0]]; ok {
			for _, n := range names {
				if res[n].Feasible && pi[n].Feasible && res[n].Predicted.Cost.Mean > pi[n].Predicted.Cost.Mean+1e-9 {
					t.Errorf("%s at %s: per-function $%.2f above per-instance $%.2f", n, pt[0], res[n].Predicted.Cost.Mean, pi[n].Predicted.Cost.Mean)
				}
			}
		}
	}
	if len(prevStatic) != 2 {
		t.Fatal("no feasible static plan along the sweep: the facts were not exercised")
	}
}
