package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

const ashaQuickstart = "examples/asha-quickstart.yaml"

// An ASHA job through the CLI: plan --out writes its GPU schedule, run --plan runs it in virtual
// time to the end (its journal passing the promotion rule's audit, its report showing rungs and
// phases), status shows the same, and a run through a fault schedule ends held to the rule.
func TestASHAThroughTheCLI(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	out, errOut, code := rb(t, "plan", ashaQuickstart, "--out", planFile)
	if code != 0 || !strings.Contains(out, "asha, elastic") || !strings.Contains(out, "asha, fixed slots") {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	plan, err := planner.ReadReportFile(planFile)
	if err != nil || plan.ASHA == nil || len(plan.ASHA.Elastic.Plan.GPUs) < 2 {
		t.Fatalf("plan file: %v %+v", err, plan)
	}
	out, errOut, code = rbEnv(t, binary, env, "run", ashaQuickstart, "--backend", "virtual", "--plan", planFile)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"RUNG", "PROMOTED", "PHASE", "realized"} {
		if !strings.Contains(out, want) {
			t.Errorf("run's report has no %s:\n%s", want, out)
		}
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Fatalf("%d runs", len(entries))
	}
	dir := filepath.Join(root, entries[0].Name())
	rep := readRunReport(t, dir)
	events, err := executor.ReadJournal(filepath.Join(dir, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := spec.Load(filepath.Join("../..", ashaQuickstart))
	if err != nil {
		t.Fatal(err)
	}
	best, err := executor.VerifyASHA(exp, events)
	if err != nil || !rep.Finished || rep.Best == nil || rep.Best.Trial != best {
		t.Fatalf("finished %v, best %+v, the rule's %s (%v)", rep.Finished, rep.Best, best, err)
	}
	status, _, code := rbEnv(t, binary, env, "status", dir, "-o", "json")
	var res executor.Report
	if code != 0 || json.Unmarshal([]byte(status), &res) != nil || len(res.Phases) != len(plan.ASHA.Elastic.Plan.GPUs) || res.Best.Trial != best {
		t.Fatalf("status -o json: exit %d\n%s", code, status)
	}
	out, errOut, code = rbEnv(t, binary, env, "run", ashaQuickstart, "--backend", "virtual", "--plan", planFile, "--faults", "3")
	if code != 0 || !strings.Contains(errOut, "faults (seed 3)") {
		t.Fatalf("run --faults: exit %d\n%s%s", code, out, errOut)
	}
}
