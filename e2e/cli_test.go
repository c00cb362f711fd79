package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rubberband-hpo/rubberband/planner"
)

// binary is the CLI built with the race detector: end-to-end tests of behaviour drive it as a user
// would, and a data race anywhere in a run fails them (exit 66). The benchmarks that time runs
// against predictions use a plain build instead (timed), which the race detector would slow.
var binary, buildDir string

// TestMain builds the CLI once, beside its own rubberband-trainer, as `make build` lays them out.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rubberband-cli")
	if err != nil {
		panic(err)
	}
	// Sandboxed trainers (a root server's) run the built-in ones from this build: other users
	// must reach it.
	if err := os.Chmod(dir, 0o711); err != nil {
		panic(err)
	}
	buildDir, binary = dir, filepath.Join(dir, "race", "rubberband")
	// A binary built with -race sleeps a second at exit (atexit_sleep_ms, 1,000 by default) so
	// that other goroutines may still report a race: a second on each of the suite's thousands of
	// CLI calls. 50 ms keeps that window for the races of a command's last moments.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=50")
	}
	if err := build(filepath.Join(dir, "race"), "-race"); err != nil {
		panic(err)
	}
	code := m.Run()
	kubeCP.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds the CLI into dir with flags, and beside it the trainers alone (as make build:
// static, without the dynamic loader's start-up).
func build(dir string, flags ...string) error {
	for _, b := range []struct {
		args []string
		env  string
	}{
		{append(append([]string{"build"}, flags...), "-o", filepath.Join(dir, "rubberband"), "../cmd/rubberband"), ""},
		{[]string{"build", "-o", filepath.Join(dir, "rubberband-trainer"), "../cmd/rubberband-trainer"}, "CGO_ENABLED=0"},
	} {
		cmd := exec.Command("go", b.args...)
		cmd.Env = append(os.Environ(), b.env)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(b.args, " "), err, out)
		}
	}
	return nil
}

var (
	timedOnce  sync.Once
	timedBuild error
)

// timed is the plain build, built on first use: only the benchmarks need it.
func timed(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(buildDir, "plain")
	timedOnce.Do(func() { timedBuild = build(dir) })
	if timedBuild != nil {
		t.Fatal(timedBuild)
	}
	return filepath.Join(dir, "rubberband")
}

func rb(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return rbWith(t, binary, args...)
}

// rbTimed runs the plain build: for runs whose timing is measured.
func rbTimed(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return rbWith(t, timed(t), args...)
}

func rbWith(t testing.TB, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return rbEnv(t, bin, nil, args...)
}

// rbEnv runs bin with env added to the test's environment, in the repository's root.
func rbEnv(t testing.TB, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return rbAt(t, "..", bin, env, args...)
}

// rbAt runs bin in dir, with env added to the test's environment.
func rbAt(t testing.TB, dir, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

const table2 = "examples/paper/table2-resnet101.yaml"

func TestValidate(t *testing.T) {
	t.Parallel()
	out, _, code := rb(t, "validate", table2)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "ok: table2-resnet101-cifar10: SHA(n=32, r=1, R=50, eta=3), 1 bracket, 4 stages, 32 trials") {
		t.Fatalf("exit %d: %q", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: ok\nobjective: {metric: acc}\nalgorithm: {sha: {trials: 8, min_iters: 1, max_iters: 9, eta: 3}}\n"+
		"cluster: {instance_type: p9.huge}\nprofile: {iter_latency: {1: {mean: 1}}}\nplanner: {samples: -1}\n"), 0o644)
	_, errOut, code := rb(t, "validate", bad)
	if code != 2 {
		t.Fatalf("exit %d for an invalid spec", code)
	}
	for _, want := range []string{bad + `:4: cluster.instance_type: unknown instance type "p9.huge"`, bad + ":6: planner.samples: -1 is out of range"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestPlanJSONAndSimulateAgree(t *testing.T) {
	t.Parallel()
	planFile := filepath.Join(t.TempDir(), "plan.json")
	out, errOut, code := rb(t, "plan", table2, "--planner", "optimal", "--deadline", "30m", "-o", "json", "--out", planFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep["experiment"] != "table2-resnet101-cifar10" || rep["planner"] != "optimal" || rep["deadline_s"] != 1800.0 || rep["feasible"] != true {
		t.Fatalf("header fields: %v %v %v %v", rep["experiment"], rep["planner"], rep["deadline_s"], rep["feasible"])
	}
	stages := rep["brackets"].([]any)[0].(map[string]any)["stages"].([]any)
	if len(stages) != 4 {
		t.Fatalf("%d stages", len(stages))
	}
	for i, s := range stages {
		st := s.(map[string]any)
		for _, k := range []string{"trials", "iters", "gpus", "gpus_per_trial", "nodes"} {
			if _, ok := st[k].(float64); !ok {
				t.Fatalf("stage %d lacks %s", i, k)
			}
		}
	}
	pred := rep["predicted"].(map[string]any)
	jct := pred["jct_s"].(map[string]any)
	if jct["p50"].(float64) > 1800 || pred["deadline_miss_prob"].(float64) > 0.5 {
		t.Fatalf("plan misses its deadline: %v", pred)
	}
	for _, block := range []map[string]any{pred, rep["static"].(map[string]any)["predicted"].(map[string]any)} {
		for _, k := range []string{"jct_s", "cost_usd"} {
			for _, q := range []string{"mean", "p50", "p95"} {
				if _, ok := block[k].(map[string]any)[q].(float64); !ok {
					t.Fatalf("predicted block lacks %s.%s: %v", k, q, block)
				}
			}
		}
	}
	if rep["static"].(map[string]any)["predicted"].(map[string]any)["cost_usd"].(map[string]any)["mean"].(float64) < pred["cost_usd"].(map[string]any)["mean"].(float64) {
		t.Fatal("optimal plan predicted dearer than static")
	}
	// The plan file, simulated with the same seed and samples, predicts the same numbers.
	simOut, errOut, code := rb(t, "simulate", table2, "--plan", planFile, "--deadline", "30m", "-o", "json")
	if code != 0 {
		t.Fatalf("simulate exit %d: %s", code, errOut)
	}
	var sim map[string]any
	json.Unmarshal([]byte(simOut), &sim)
	if a, b := sim["predicted"].(map[string]any)["cost_usd"], pred["cost_usd"]; !equalJSON(a, b) {
		t.Fatalf("simulate --plan predicts %v, plan said %v", a, b)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestSimulateAllocTable(t *testing.T) {
	t.Parallel()
	out, errOut, code := rb(t, "simulate", table2, "--alloc", "32,20,12,8", "--deadline", "30m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The stage rows of the paper's Table 3 plan: stage (from 1), trials, iterations, GPUs, GPUs
	// per trial, nodes.
	for _, row := range []string{`1\s+32\s+1\s+32\s+1\s+8\s+1`, `2\s+10\s+3\s+20\s+2\s+5\s+1`, `3\s+3\s+9\s+12\s+4\s+3\s+1`, `4\s+1\s+37\s+8\s+8\s+2\s+1`} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("no stage row %q in\n%s", row, out)
		}
	}
	if !strings.Contains(out, "predicted  JCT") {
		t.Errorf("no totals line:\n%s", out)
	}
	// At the spec's own deadline, 20 minutes, it misses: exit 3, as plan's.
	out, errOut, code = rb(t, "simulate", table2, "--alloc", "32,20,12,8")
	if code != 3 || !strings.Contains(out, "DEADLINE MISSED") ||
		!regexp.MustCompile(`the plan misses the deadline 20m0s at p50: it takes \d+:\d\d \(p50\)`).MatchString(errOut) {
		t.Errorf("past the deadline: exit %d: %s\n%s", code, errOut, out)
	}
	// Hyperband: one allocation per bracket, separated by ';'.
	hb := filepath.Join(t.TempDir(), "hb.yaml")
	os.WriteFile(hb, []byte("name: hb\nobjective: {metric: acc}\nalgorithm: {hyperband: {min_iters: 1, max_iters: 9, eta: 3}}\n"+
		"cluster: {instance_type: p3.8xlarge}\nprofile: {file: "+filepath.Join(mustAbs(t, "../examples/paper/profiles"), "resnet50-b512-p3.8xlarge.yaml")+"}\n"), 0o644)
	out, errOut, code = rb(t, "simulate", hb, "--alloc", "9,3,1;5,2;3", "-o", "json")
	if code != 0 {
		t.Fatalf("hyperband exit %d: %s", code, errOut)
	}
	var rep struct {
		Brackets []struct{ Stages []struct{ Trials, GPUs int } }
	}
	json.Unmarshal([]byte(out), &rep)
	if len(rep.Brackets) != 3 || rep.Brackets[1].Stages[0].Trials != 5 || rep.Brackets[1].Stages[1].GPUs != 2 {
		t.Fatalf("hyperband brackets %+v", rep.Brackets)
	}
	// Allocations that cannot be placed are refused with exit 2.
	_, errOut, code = rb(t, "simulate", table2, "--alloc", "32,15,12,8")
	if code != 2 || !strings.Contains(errOut, "do not divide evenly") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPlanInfeasibleExits3(t *testing.T) {
	t.Parallel()
	out, errOut, code := rb(t, "plan", table2, "--deadline", "5m")
	if code != 3 {
		t.Fatalf("exit %d, want 3", code)
	}
	if !regexp.MustCompile(`no plan meets the deadline 5m0s at p50: the fastest plan found takes \d+:\d\d \(p50\)`).MatchString(errOut) {
		t.Fatalf("stderr: %s", errOut)
	}
	if !strings.Contains(out, "DEADLINE MISSED") {
		t.Fatalf("table does not say the deadline is missed:\n%s", out)
	}
}

func TestPlanTableShowsStaticBaseline(t *testing.T) {
	t.Parallel()
	out, _, code := rb(t, "plan", "examples/quickstart.yaml", "--samples", "50", "--seed", "3")
	if code != 0 || !strings.Contains(out, "static ") || !strings.Contains(out, "saving vs the best static cluster") || !strings.Contains(out, "50 samples, seed 3") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"plan"},
		{"plan", table2, "--planner", "clever"},
		{"plan", table2, "--deadline", "soon"},
		{"plan", table2, "-o", "xml"},
		{"simulate", table2},
		{"simulate", table2, "--alloc", "1,x"},
	} {
		_, errOut, code := rb(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestWhatIf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	png := filepath.Join(dir, "cost.png")
	out, errOut, code := rb(t, "whatif", table2, "--sweep", "deadline=20m..40m/10m", "--sweep", "cluster.billing.model=per-instance,per-function",
		"--planners", "static,greedy", "--samples", "30", "-o", "json", "--plot", png)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var w planner.WhatIf
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		t.Fatal(err)
	}
	if len(w.Points) != 6 || w.Points[0].Params["deadline"] != "20m0s" || w.Points[1].Params["cluster.billing.model"] != "per-function" {
		t.Fatalf("points %+v", w.Points)
	}
	for _, p := range w.Points {
		st, gr := p.Results["static"], p.Results["greedy"]
		if st.Predicted.JCT.Mean <= 0 || (st.Feasible && gr.Predicted.Cost.Mean > st.Predicted.Cost.Mean+1e-9) {
			t.Fatalf("point %v: %+v", p.Params, p.Results)
		}
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("no PNG chart: %v", err)
	}
	csvOut, _, code := rb(t, "whatif", table2, "--sweep", "deadline=5m,30m", "--planners", "static,optimal", "--samples", "20", "-o", "csv")
	lines := strings.Split(strings.TrimSpace(csvOut), "\n")
	if code != 0 || len(lines) != 1+2*2 || !strings.HasPrefix(lines[0], "deadline,planner,feasible") || !strings.Contains(lines[1], "5m,static,false") {
		t.Fatalf("csv exit %d:\n%s", code, csvOut)
	}
	for _, bad := range [][]string{{"--sweep", "deadline=1m..2m"}, {"--sweep", "cluster.billing.model=monthly"}, {"--sweep", "cluster.colour=red"}, {}} {
		if _, errOut, code := rb(t, append([]string{"whatif", table2}, bad...)...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d %s", bad, code, errOut)
		}
	}
}

// plan --gantt and simulate --gantt/--hist write pictures.
func TestPlanAndSimulatePictures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, errOut, code := rb(t, "plan", table2, "--gantt", filepath.Join(dir, "g.svg")); code != 0 {
		t.Fatal(errOut)
	}
	if _, errOut, code := rb(t, "simulate", table2, "--alloc", "32,20,12,8", "--deadline", "30m", "--hist", filepath.Join(dir, "h.png"), "--gantt", filepath.Join(dir, "g.png")); code != 0 {
		t.Fatal(errOut)
	}
	for _, f := range []string{"g.svg", "h.png", "h-cost.png", "g.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// exitDeadlineMissed is the CLI's exit code for a run that finished past its deadline.
const exitDeadlineMissed = 5
