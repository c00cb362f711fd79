package driver

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The plan PlanJob writes is the one Simulate reads back: the same planner, and a prediction
// that meets the deadline as the plan's did.
func TestPlanJobFileIsWhatSimulateReads(t *testing.T) {
	t.Parallel()
	exp, err := spec.Load("../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.For(exp)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "plan.json")
	p, err := PlanJob(context.Background(), exp, s, "", out, nil)
	if err != nil || p.Check != nil {
		t.Fatalf("PlanJob: %v, check %v", err, p.Check)
	}
	var table bytes.Buffer
	p.Table(&table)
	if table.Len() == 0 || p.JSON.(*planner.Report).Planner != exp.Planner.Name {
		t.Fatalf("the plan's output: %q, %+v", table.String(), p.JSON)
	}
	if _, err := rundir.ReadPlanFile(out); err != nil {
		t.Fatalf("the plan file: %v", err)
	}
	sim, err := Simulate(exp, s, true, out, "", "")
	if err != nil || sim.Check != nil {
		t.Fatalf("Simulate the plan: %v, check %v", err, sim.Check)
	}
	if got := sim.JSON.(*planner.Report).Planner; got != exp.Planner.Name {
		t.Fatalf("simulated plan's planner %q, want %q", got, exp.Planner.Name)
	}
}

// A list that is no allocation, or a plan file that is not there, is the user's to fix.
func TestSimulateRefusesWhatIsNoAllocation(t *testing.T) {
	t.Parallel()
	exp, err := spec.Load("../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.For(exp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Simulate(exp, s, false, "lots", "", ""); !errors.Is(err, ErrInput) || !strings.HasPrefix(err.Error(), "--alloc: ") {
		t.Errorf("--alloc lots: %v, want ErrInput naming --alloc", err)
	}
	if _, err := Simulate(exp, s, true, filepath.Join(t.TempDir(), "none.json"), "", ""); !errors.Is(err, ErrInput) {
		t.Errorf("a missing plan file: %v, want ErrInput", err)
	}
}
