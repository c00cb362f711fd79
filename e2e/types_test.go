package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// A spec with several instance types and markets: plan gives each stage a type and a market,
// shows them, the expected interruptions and their cost, and beside the plan the best
// on-demand-only and best single-type plans, which it never costs more than.
func TestPlanInstanceTypes(t *testing.T) {
	t.Parallel()
	file := mustAbs(t, "../examples/paper/table2-types.yaml")
	out, errOut, code := rb(t, "plan", file, "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	var rep planner.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, st := range rep.Brackets[0].Stages {
		if st.Type == "" || st.Market == "" {
			t.Fatalf("a stage without its type and market: %+v", st)
		}
	}
	names := map[string]bool{}
	for _, alt := range rep.Alternatives {
		names[alt.Name] = true
		if alt.SavingPct == nil || *alt.SavingPct < 0 {
			t.Errorf("the plan ($%.2f) is not cheaper than the best plan %s ($%.2f)", rep.Predicted.Cost.Mean, alt.Name, alt.Predicted.Cost.Mean)
		}
	}
	if len(rep.Alternatives) != 2 || !names["on-demand only"] {
		t.Fatalf("alternatives %v, want on-demand only and the best single type", names)
	}
	table, _, code := rb(t, "plan", file)
	for _, want := range []string{"TYPE", "MARKET", "INTERRUPTIONS", "THEIR COST", "saving vs the best plan on-demand only", "p3.16xlarge"} {
		if code != 0 || !strings.Contains(table, want) {
			t.Fatalf("plan's table lacks %q (exit %d):\n%s", want, code, table)
		}
	}
}

// whatif sweeps the spot market: a dearer spot price (a smaller discount) costs more, and more
// interruptions cost more, at every other point of the grid. (At 3 an hour, with nodes lost while
// provisioning or idle in the model, no all-spot plan meets the 20-minute deadline: 20:01.)
func TestWhatifSweepsSpot(t *testing.T) {
	t.Parallel()
	out, errOut, code := rb(t, "whatif", mustAbs(t, "../examples/paper/table2-spot.yaml"), "--planners", "greedy", "-o", "json",
		"--sweep", "cluster.spot.interruptions_per_hour=0,2", "--sweep", "cluster.spot.discount=0.5,0.8")
	if code != 0 {
		t.Fatalf("whatif: exit %d\n%s", code, errOut)
	}
	var w planner.WhatIf
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		t.Fatal(err)
	}
	cost := map[[2]string]float64{}
	for _, p := range w.Points {
		g, ok := p.Results["greedy"]
		if !ok || !g.Feasible {
			t.Fatalf("point %v: no feasible greedy plan (%s)", p.Params, p.Error)
		}
		cost[[2]string{p.Params["cluster.spot.interruptions_per_hour"], p.Params["cluster.spot.discount"]}] = g.Predicted.Cost.Mean
	}
	if len(cost) != 4 {
		t.Fatalf("%d points, want 4: %v", len(cost), cost)
	}
	for _, rate := range []string{"0", "2"} {
		if cost[[2]string{rate, "0.5"}] <= cost[[2]string{rate, "0.8"}] {
			t.Errorf("at %s interruptions an hour, 50%% off costs $%.2f, 80%% off $%.2f", rate, cost[[2]string{rate, "0.5"}], cost[[2]string{rate, "0.8"}])
		}
	}
	for _, d := range []string{"0.5", "0.8"} {
		if cost[[2]string{"2", d}] <= cost[[2]string{"0", d}] {
			t.Errorf("at %s off, 2 interruptions an hour cost $%.2f, none $%.2f", d, cost[[2]string{"2", d}], cost[[2]string{"0", d}])
		}
	}
	t.Logf("greedy's cost by (interruptions per hour, discount): %v", cost)
}

// profile --instance-type measures on one candidate of instance_types (its GPUs per node) and
// says so in the profile's notes; a type the spec does not offer is a usage error.
func TestProfileInstanceType(t *testing.T) {
	t.Parallel()
	src, err := syntheticSource()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	specFile := filepath.Join(dir, "types.yaml")
	os.WriteFile(specFile, []byte(twoTypes(string(src))), 0o644)
	out := filepath.Join(dir, "big.yaml")
	if _, errOut, code := rb(t, "profile", specFile, "--instance-type", "big", "--gpus", "1", "--iters", "2", "--rounds", "1",
		"--time-scale", "0.05", "--out", out); code != 0 {
		t.Fatalf("profile: exit %d\n%s", code, errOut)
	}
	if prof, _ := os.ReadFile(out); !strings.Contains(string(prof), "for instance type big (4 GPUs per node)") {
		t.Fatalf("the profile does not say which type it measured:\n%s", prof)
	}
	if _, errOut, code := rb(t, "profile", specFile, "--instance-type", "p3.2xlarge", "--out", out); code != 2 || !strings.Contains(errOut, "not a candidate") {
		t.Fatalf("an instance type the spec does not offer: exit %d\n%s", code, errOut)
	}
}

// A run whose plan changes instance type between stages on the local backend: the stages on the
// small type rent small nodes; at the change every small node goes before the big one is rented
// (the provider offers both), and the run finishes.
func TestRunChangesInstanceType(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, src := syntheticSpec(t, dir, "synthetic.yaml")
	os.WriteFile(file, []byte(twoTypes(strings.ReplaceAll(src, "--spec, synthetic.yaml]", "--spec, "+file+"]"))), 0o644)
	plan := planFile(t, dir, file, "4@small,4@small,4@big,2@big")
	events := runLocal(t, file, plan, filepath.Join(dir, "state"))
	held := map[string]string{} // node -> type
	rented := map[string]int{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvNodeUp:
			if e.Node.InstanceType == "big" {
				for id, typ := range held {
					if typ == "small" {
						t.Fatalf("a big node came up while small node %s was held", id)
					}
				}
			}
			held[e.Node.ID] = e.Node.InstanceType
			rented[e.Node.InstanceType]++
		case journal.EvNodeOff, journal.EvInterrupt:
			for _, id := range e.Nodes {
				delete(held, id)
			}
		}
	}
	if rented["small"] != 4 || rented["big"] != 1 || len(held) != 0 {
		t.Fatalf("rented %v, still held at the end %v; want 4 small then 1 big, none left", rented, held)
	}
}

// runLocal runs a spec's plan on the local backend at a twentieth of real time into state, and
// returns its journal.
func runLocal(t *testing.T, specFile, plan, state string) []journal.Event {
	t.Helper()
	// The plan is kept (--no-replan): its change of type is under test.
	if out, errOut, code := rb(t, "run", specFile, "--plan", plan, "--state", state, "--time-scale", "0.05", "--no-replan"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, errOut, out)
	}
	events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// twoTypes replaces the synthetic spec's one type with two: small (1 GPU, $3/h) and big (4 GPUs,
// $12/h).
func twoTypes(src string) string {
	return strings.Replace(src, "  gpus_per_node: 4\n  price_per_hour: 12\n",
		"  instance_types: [{instance_type: small, gpus_per_node: 1, price_per_hour: 3}, {instance_type: big, gpus_per_node: 4, price_per_hour: 12}]\n", 1)
}
