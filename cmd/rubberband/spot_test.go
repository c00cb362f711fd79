package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
)

// Spot interruptions emulated on the local backend (the interruptions the plan expects, seeded
// by the spec): each notice stops the gangs on its node, which save their checkpoints; the driver
// journals the interruption, replaces the node and goes on from the checkpoints. The run finishes
// with the winner of the same plan run on-demand, every interrupted trial goes on where it was,
// and the report lists the interruptions.
func TestLocalSpotInterruptionsEmulated(t *testing.T) {
	dir := t.TempDir()
	onDemand, src := syntheticSpec(t, dir, "on-demand.yaml")
	spot := filepath.Join(dir, "spot.yaml")
	os.WriteFile(spot, []byte(strings.Replace(strings.ReplaceAll(src, "cmd/rubberband/testdata/synthetic.yaml", spot),
		"  max_nodes: 4\n", "  max_nodes: 4\n  market: spot\n  spot: {price_per_hour: 4, interruptions_per_hour: 40, notice: 10s}\n", 1)), 0o644)
	plan := planFile(t, dir, spot, "8,8,4,2")
	out, _, code := rb(t, "plan", spot)
	if code != 0 || !strings.Contains(out, "INTERRUPTIONS") {
		t.Fatalf("plan of a spot job shows no expected interruptions:\n%s", out)
	}
	state := filepath.Join(dir, "spot")
	if out, errOut, code := rb(t, "run", spot, "--plan", plan, "--state", state, "--time-scale", "0.05"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, errOut, out)
	}
	events, err := executor.ReadJournal(filepath.Join(state, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	journaled, tries, resumed := checkInterruptions(t, events)
	rep := readRunReport(t, state)
	if len(journaled) == 0 || tries == 0 || len(rep.Interruptions) == 0 {
		t.Fatalf("no interruption hit a gang (%d journaled, %d tries, report %+v)", len(journaled), tries, rep.Interruptions)
	}
	said := false // an interruption learnt from its notice says so (one found gone does not)
	for _, in := range rep.Interruptions {
		said = said || strings.Contains(in.Why, "spot interruption notice (emulated)")
	}
	if !said {
		t.Errorf("no interruption says it came from a notice: %+v", rep.Interruptions)
	}
	sameWinnerAsLocal(t, rep, onDemand, plan, filepath.Join(dir, "on-demand"))
	t.Logf("%d node(s) interrupted, %d tries relaunched from their checkpoints (%v); cost realized $%.4f, predicted $%.4f (%+.1f%%); JCT realized %.1f s, predicted %.1f s (%+.1f%%)",
		len(journaled), tries, resumed, rep.Realized.Cost, rep.Predicted.Cost, pct(rep.Realized.Cost, rep.Predicted.Cost),
		rep.Realized.JCT, rep.Predicted.JCT, pct(rep.Realized.JCT, rep.Predicted.JCT))
}

// A budget under the plan's predicted cost: plan says both figures and exits 3; run refuses the
// same way before it makes a run; a budget above it passes, and plan shows it.
func TestBudget(t *testing.T) {
	dir := t.TempDir()
	_, src := syntheticSpec(t, dir, "synthetic.yaml")
	withBudget := func(usd string) string {
		f := filepath.Join(dir, "budget-"+usd+".yaml")
		os.WriteFile(f, []byte(strings.ReplaceAll(src, "cmd/rubberband/testdata/synthetic.yaml", f)+"budget: {max_cost_usd: "+usd+"}\n"), 0o644)
		return f
	}
	out, errOut, code := rb(t, "plan", withBudget("0.05"))
	if code != 3 || !strings.Contains(errOut, "over budget") || !strings.Contains(errOut, "the budget is $0.05") || !strings.Contains(out, "OVER BUDGET") {
		t.Fatalf("plan over budget: exit %d\n%s\n%s", code, out, errOut)
	}
	state := filepath.Join(dir, "state")
	if _, errOut, code := rb(t, "run", withBudget("0.05"), "--state", state); code != 3 || !strings.Contains(errOut, "over budget") {
		t.Fatalf("run over budget: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(state, "run.json")); err == nil {
		t.Fatal("a run refused for its budget left run.json")
	}
	if out, errOut, code := rb(t, "plan", withBudget("100")); code != 0 || !strings.Contains(out, "budget     $100.00") || !strings.Contains(out, "within it") {
		t.Fatalf("plan within budget: exit %d\n%s\n%s", code, out, errOut)
	}
}
