package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/ui"
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
	plan, err := rundir.ReadPlanFile(planFile)
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
	events, err := journal.ReadJournal(filepath.Join(dir, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	exp, err := spec.Load(filepath.Join("..", ashaQuickstart))
	if err != nil {
		t.Fatal(err)
	}
	best, err := runstate.VerifyASHA(exp, events)
	if err != nil || !rep.Finished || rep.Best == nil || rep.Best.Trial != best {
		t.Fatalf("finished %v, best %+v, the rule's %s (%v)", rep.Finished, rep.Best, best, err)
	}
	status, _, code := rbEnv(t, binary, env, "status", dir, "-o", "json")
	var res runstate.Report
	if code != 0 || json.Unmarshal([]byte(status), &res) != nil || len(res.Phases) != len(plan.ASHA.Elastic.Plan.GPUs) || res.Best.Trial != best {
		t.Fatalf("status -o json: exit %d\n%s", code, status)
	}
	ashaDashboard(t, root, entries[0].Name())
	out, errOut, code = rbEnv(t, binary, env, "run", ashaQuickstart, "--backend", "virtual", "--plan", planFile, "--faults", "3")
	if !finishedCode(code) || !strings.Contains(errOut, "faults (seed 3)") {
		t.Fatalf("run --faults: exit %d\n%s%s", code, out, errOut)
	}
	whatifASHA(t)
}

// ashaDashboard: the dashboard's page of a finished ASHA run draws its planned schedule (a sampled
// run of the GPU schedule: jobs by rung, lines at the phases) beside the realized one (its nodes'
// provisioning, its jobs by rung).
func ashaDashboard(t *testing.T, root, name string) {
	page := runPage(t, root, name)
	planned, realized, ok := strings.Cut(page, `id="gantt-realized"`)
	if !ok || !strings.Contains(planned, `id="gantt-planned"`) {
		t.Fatalf("the run page has no planned and realized schedules:\n%s", page)
	}
	realized, _, _ = strings.Cut(realized, "</svg>")
	for _, want := range []string{"(rung 1)", "(rung 3)", "phase from"} {
		if !strings.Contains(planned, want) {
			t.Errorf("the planned schedule has no %q", want)
		}
	}
	for _, want := range []string{"(rung 1)", "(rung 3)", `class="prov"`} {
		if !strings.Contains(realized, want) {
			t.Errorf("the realized schedule has no %q", want)
		}
	}
}

// whatif sweeps an ASHA job as plan compares it: its elastic schedule, fixed slots and
// synchronous SHA at each point, the saving against fixed slots. Where no schedule meets the
// deadline the elastic one is the fastest (fixed slots), not a cheaper one that misses by more;
// --planners does not apply.
func whatifASHA(t *testing.T) {
	out, errOut, code := rb(t, "whatif", ashaQuickstart, "--sweep", "deadline=20s,45s", "-o", "json")
	var wi planner.WhatIf
	if code != 0 || json.Unmarshal([]byte(out), &wi) != nil {
		t.Fatalf("whatif: exit %d\n%s%s", code, out, errOut)
	}
	if fmt.Sprint(wi.Planners) != fmt.Sprint(planner.ASHAOutcomes()) || wi.SavingAgainst != planner.ASHAFixed || len(wi.Points) != 2 {
		t.Fatalf("whatif: planners %v against %q, %d points", wi.Planners, wi.SavingAgainst, len(wi.Points))
	}
	short, long := wi.Points[0].Results, wi.Points[1].Results
	if e, f := short[planner.ASHAElastic], short[planner.ASHAFixed]; e.Feasible || e.Predicted.JCT != f.Predicted.JCT {
		t.Errorf("at 20s the elastic schedule %v (JCT %+v) is not the fastest fixed slots %v (%+v)", e.ASHA, e.Predicted.JCT, f.ASHA, f.Predicted.JCT)
	}
	e, f := long[planner.ASHAElastic], long[planner.ASHAFixed]
	if !e.Feasible || e.ASHA == nil || len(e.ASHA.GPUs) < 2 || e.SavingPct == nil || e.Predicted.Cost.Mean > f.Predicted.Cost.Mean ||
		math.Abs(*e.SavingPct-100*(1-e.Predicted.Cost.Mean/f.Predicted.Cost.Mean)) > 1e-9 {
		t.Errorf("at 45s: elastic %+v, fixed %+v", e, f)
	}
	if _, ok := long[planner.SHASync]; !ok {
		t.Error("no synchronous sha beside it")
	}
	if _, errOut, code := rb(t, "whatif", ashaQuickstart, "--sweep", "deadline=30s", "--planners", "greedy"); code != 2 || !strings.Contains(errOut, "asha") {
		t.Errorf("--planners on an asha job: exit %d %s", code, errOut)
	}
}

// An ASHA job on Nomad: gangs as Nomad jobs, promotions resuming their trials' checkpoints
// through the store. On one GPU its jobs run one at a time in the rule's order, so the promotion
// sequence, and the winner, are the local backend's (the synthetic metrics depend only on the
// parameters); each journal passes the rule's audit.
func TestASHAOnNomad(t *testing.T) {
	t.Parallel()
	nomadBin := servers.Binary(t, "nomad", "RB_NOMAD_BIN")
	dir := t.TempDir()
	specFile, src := syntheticSpec(t, dir, "synthetic-asha.yaml")
	text := strings.Replace(src, "algorithm: {sha: {trials: 16, min_iters: 1, max_iters: 9, eta: 2}}",
		"algorithm: {asha: {trials: 9, min_iters: 1, max_iters: 9, eta: 3}}", 1)
	text = strings.ReplaceAll(text, "--spec, synthetic.yaml]", "--spec, "+specFile+"]")
	if err := os.WriteFile(specFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	exp, err := spec.Load(specFile)
	if err != nil {
		t.Fatal(err)
	}
	one := &planner.ASHAResult{Experiment: exp.Name, Trials: 9, Rungs: exp.Algorithm.ASHA.Rungs(0), Quantile: 0.5,
		Elastic: planner.ASHACandidate{Plan: sim.ASHAPlan{GPUs: []int{1}}, Feasible: true}}
	plan := filepath.Join(dir, "plan.json")
	b, _ := json.Marshal(one.Report(exp))
	if err := os.WriteFile(plan, b, 0o644); err != nil {
		t.Fatal(err)
	}
	promotions := func(state string) (string, []string) {
		t.Helper()
		events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
		if err != nil {
			t.Fatal(err)
		}
		best, err := runstate.VerifyASHA(exp, events)
		if err != nil {
			t.Fatal(err)
		}
		var seq []string
		for _, e := range events {
			if e.Ev == journal.EvPromote {
				seq = append(seq, fmt.Sprintf("%s@%d", e.Trial, e.Stage))
			}
		}
		return best, seq
	}
	state := filepath.Join(dir, "nomad")
	// One GPU, kept (--no-replan: a re-plan from Nomad's slower start-ups would run trials side by
	// side, and the order of results with them): the promotions are then the same on both.
	cmd := exec.Command(binary, "run", specFile, "--plan", plan, "--backend", "nomad", "--state", state, "--time-scale", "0.05", "--no-replan")
	cmd.Env = append(os.Environ(), "RB_NOMAD_BIN="+nomadBin, "NOMAD_ADDR=")
	if out, err := cmd.CombinedOutput(); !ranToEnd(err) {
		t.Fatalf("run on nomad: %v\n%s", err, out)
	}
	local := filepath.Join(dir, "local")
	if _, errOut, code := rb(t, "run", specFile, "--plan", plan, "--state", local, "--time-scale", "0.02", "--no-replan"); !finishedCode(code) {
		t.Fatal(errOut)
	}
	onNomad, onLocal := readRunReport(t, state), readRunReport(t, local)
	nomadBest, nomadSeq := promotions(state)
	localBest, localSeq := promotions(local)
	if !onNomad.Finished || onNomad.Best == nil || onNomad.Best.Trial != nomadBest || onLocal.Best.Trial != localBest ||
		nomadBest != localBest || strings.Join(nomadSeq, " ") != strings.Join(localSeq, " ") {
		t.Fatalf("nomad: best %+v, promotions %v; local: best %+v, promotions %v", onNomad.Best, nomadSeq, onLocal.Best, localSeq)
	}
}

// An ASHA job that runs slower than its profile, through the CLI: run re-plans its schedule
// (the report and status list each revision of the schedule from its phase on, with why and
// both forecasts); with --no-replan the plan is kept.
func TestASHAReplanThroughTheCLI(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	const job = "examples/asha-replan.yaml"
	if out, errOut, code := rb(t, "plan", job, "--out", planFile); code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := rbEnv(t, binary, env, "run", job, "--backend", "virtual", "--plan", planFile, "--state", filepath.Join(root, "replan"))
	if code != 0 || !strings.Contains(errOut+out, "re-plan asha from phase 1: the plan now misses the deadline") {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"re-plan", "asha from phase 1", "forecast JCT", "re-planned JCT"} {
		if !strings.Contains(out, want) {
			t.Errorf("run's report has no %q:\n%s", want, out)
		}
	}
	status, _, code := rbEnv(t, binary, env, "status", filepath.Join(root, "replan"), "-o", "json")
	var res runstate.Report
	if code != 0 || json.Unmarshal([]byte(status), &res) != nil || len(res.Revisions) == 0 || !res.Revisions[0].Phase {
		t.Fatalf("status -o json: exit %d\n%s", code, status)
	}
	// The first revision gave the first phase more GPUs: a phase of that many began with it.
	first, began := res.Revisions[0], false
	for _, p := range res.Phases {
		began = began || p.Start == first.At && p.GPUs == first.Plan[0].GPUs
	}
	if first.Plan[0].GPUs <= first.GPUsBefore[0] || !began {
		t.Fatalf("the first revision %+v; phases %+v", first, res.Phases)
	}
	out, errOut, code = rbEnv(t, binary, env, "run", job, "--backend", "virtual", "--plan", planFile, "--state", filepath.Join(root, "kept"), "--no-replan")
	if !finishedCode(code) || strings.Contains(out, "re-plan") {
		t.Fatalf("run --no-replan: exit %d\n%s%s", code, out, errOut)
	}
}

// runPage is the dashboard's page of run name under root, served as the ui command serves it.
func runPage(t *testing.T, root, name string) string {
	t.Helper()
	s, err := ui.New(ui.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer func() { hs.Close(); s.Close() }()
	resp, err := http.Get(hs.URL + "/runs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	return page
}
