package driver

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A virtual run is held to the world's truth and, with faults, to the clean run's winner: the
// same winner passes; another winner is ErrFaultsChangedTheRun, naming both and the seed that
// replays the schedule.
func TestHeldToTheCleanRun(t *testing.T) {
	exp, err := spec.Load("../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, res, err := planner.PlanSpec(context.Background(), exp)
	if err != nil {
		t.Fatal(err)
	}
	out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: res.Best.Alloc,
		Journal: filepath.Join(t.TempDir(), "journal.jsonl"), RunID: VirtualRunID(exp, 0)})
	if err != nil || out.Result.Best == nil {
		t.Fatalf("clean run: %v", err)
	}
	if err := heldToTheCleanRun(out, nil); err != nil {
		t.Fatalf("a clean run, no faults: %v", err)
	}
	schedule := &virtual.Faults{Seed: 42}
	if err := heldToTheCleanRun(out, &Faults{Schedule: schedule, Best: out.Result.Best}); err != nil {
		t.Fatalf("the clean run's winner: %v", err)
	}
	other := *out.Result.Best
	other.Trial = "b0-t9999"
	err = heldToTheCleanRun(out, &Faults{Schedule: schedule, Best: &other})
	if !errors.Is(err, ErrFaultsChangedTheRun) || !strings.Contains(err.Error(), "--faults 42") ||
		!strings.Contains(err.Error(), out.Result.Best.Trial) || !strings.Contains(err.Error(), "b0-t9999") {
		t.Fatalf("another winner: %v", err)
	}
}
