package driver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Create writes a run with its spec's samples and seed and the catalog it was read with; it
// writes nothing for a backend that cannot run the spec or a plan over the spec's budget, however
// the plan was made.
func TestCreate(t *testing.T) {
	st := newRun(t, 1)
	if st.Run.Samples != st.Exp.Planner.Samples || st.Run.Seed != st.Exp.Seed || st.Run.Samples == 0 || st.Run.Seed == 0 {
		t.Errorf("run.json: samples %d, seed %d; the spec's: %d, %d", st.Run.Samples, st.Run.Seed, st.Exp.Planner.Samples, st.Exp.Seed)
	}
	if _, err := os.Stat(filepath.Join(st.Dir, rundir.CatalogCopy)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run read with no catalog keeps one: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(st.Dir, rundir.SpecCopy))
	if err != nil {
		t.Fatal(err)
	}
	exp, src := st.Exp, &spec.Source{Path: "job.yaml", Data: data}
	catalog := &spec.CatalogFile{Version: 1, Region: "us-east-1"}
	kept := filepath.Join(t.TempDir(), "kept")
	if err := Create(NewRun{Dir: kept, Run: rundir.RunFile{RunID: "r-kept", Backend: Local, TimeScale: 1}, Source: src, Spec: exp, Plan: st.Plan, Catalog: catalog}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(kept, rundir.CatalogCopy)); err != nil {
		t.Errorf("the catalog the spec was read with: %v", err)
	}

	overBudget := *exp
	overBudget.Budget.MaxCostUSD = st.Plan.Predicted.Cost.Mean / 2
	for _, tc := range []struct {
		name    string
		backend string
		exp     *spec.Experiment
		want    func(error) bool
	}{
		{"not a backend", "virtualbox", exp, func(err error) bool { return errors.Is(err, ErrInput) }},
		{"over the budget", Local, &overBudget, func(err error) bool {
			var be *planner.BudgetError
			return errors.As(err, &be)
		}},
	} {
		dir := filepath.Join(t.TempDir(), "run")
		err := Create(NewRun{Dir: dir, Run: rundir.RunFile{RunID: "r-refused", Backend: tc.backend, TimeScale: 1}, Source: src, Spec: tc.exp, Plan: st.Plan})
		if !tc.want(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, rundir.RunJSON)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a run was made (%v)", tc.name, err)
		}
	}
}
