package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// trainerFromDocs is the train.py of docs/trainers.md's walk from an empty folder (the python
// block after the first-day marker): the test runs what the page tells a new user to write.
func trainerFromDocs(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile("../docs/trainers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- first-day: train.py -->")
	if !ok {
		t.Fatal("docs/trainers.md has no <!-- first-day: train.py --> block")
	}
	m := regexp.MustCompile("(?s)^\\s*```python\\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		t.Fatal("docs/trainers.md: no ```python block after the first-day marker")
	}
	return []byte(m[1])
}

// rbIn runs the CLI in dir, as a user at a shell in that folder.
func rbIn(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return rbAt(t, dir, binary, nil, args...)
}

// A data scientist's first day, from an empty folder, as docs/trainers.md walks it: write
// train.py, init (a spec that validates, without a profile), plan before a profile (told what
// to run, exit 2: on main the message was "SPEC:0: profile.iter_latency: is required"),
// profile (measured numbers, named in the spec), plan (a time and a cost), run from another
// folder (a winner), best (the winner's configuration).
func TestFirstDay(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3")
	}
	dir := filepath.Join(t.TempDir(), "toy-tuning")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "train.py"), trainerFromDocs(t), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(what string, want int, args ...string) string {
		t.Helper()
		out, errOut, code := rbIn(t, dir, args...)
		if code != want {
			t.Fatalf("%s: exit %d, want %d\n%s%s", what, code, want, out, errOut)
		}
		return out + errOut
	}

	out := must("init", 0, "init")
	if !strings.Contains(out, "wrote rubberband.yaml") || !strings.Contains(out, "rubberband profile rubberband.yaml") {
		t.Errorf("init says %q", out)
	}
	must("init again", 2, "init") // an existing spec is left alone
	out = must("validate", 0, "validate", "rubberband.yaml")
	if !strings.HasPrefix(out, "ok: toy-tuning: SHA(n=27") || !strings.Contains(out, "no profile yet: `rubberband profile rubberband.yaml`") {
		t.Errorf("validate says %q", out)
	}
	for _, cmd := range []string{"plan", "run"} {
		out = must(cmd+" before profile", 2, cmd, "rubberband.yaml")
		if !strings.Contains(out, "rubberband profile rubberband.yaml") || strings.Contains(out, ":0:") {
			t.Errorf("%s without a profile says %q", cmd, out)
		}
	}

	out = must("profile", 0, "profile", "rubberband.yaml")
	if !strings.Contains(out, "named it in rubberband.yaml") {
		t.Errorf("profile says %q", out)
	}
	exp, err := spec.Load(filepath.Join(dir, "rubberband.yaml"))
	if err != nil {
		t.Fatalf("the profiled spec: %v", err)
	}
	if exp.ProfileFile() != "rubberband.profile.yaml" {
		t.Errorf("the spec names profile %q", exp.ProfileFile())
	}
	for _, g := range []int{1, 2, 4} {
		// train.py sleeps 0.05 s an iteration: the measurement is at least that, and not far above.
		if m := exp.Profile.IterLatency[g].Mean; !(m >= 0.045 && m < 1) {
			t.Errorf("measured %v s per iteration at %d GPUs", m, g)
		}
	}

	out = must("plan", 0, "plan", "rubberband.yaml", "-o", "json")
	var plan struct {
		Feasible  bool `json:"feasible"`
		Predicted struct {
			JCT  struct{ Mean float64 } `json:"jct_s"`
			Cost struct{ Mean float64 } `json:"cost_usd"`
		} `json:"predicted"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	if !plan.Feasible || plan.Predicted.JCT.Mean <= 0 || plan.Predicted.JCT.Mean > 3600 || plan.Predicted.Cost.Mean <= 0 {
		t.Errorf("plan: %+v", plan)
	}

	// The catalog's typical start-ups (30 s to running, 60 s to ready) are emulated on this
	// machine; --time-scale 0.02 makes them seconds.
	// Run from another folder: the trainer runs in its spec's folder (trainer.workdir's
	// default), where `python3 train.py` finds its script; the run lands in this folder's
	// .rubberband. On main the trainer ran where run was started: "can't open file train.py".
	elsewhere := t.TempDir()
	specPath := filepath.Join(dir, "rubberband.yaml")
	out, errOut, code := rbIn(t, elsewhere, "run", specPath, "--time-scale", "0.02")
	if !finishedCode(code) {
		t.Fatalf("run from another folder: exit %d\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`best trial (b0-t\d+): val_accuracy ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("run names no winner:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, ".rubberband", "toy-tuning")); err != nil {
		t.Errorf("the run is not under the folder run started from: %v", err)
	}
	out, errOut, code = rbIn(t, elsewhere, "best", "toy-tuning")
	if code != 0 {
		t.Fatalf("best: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "trial "+m[1]) || !regexp.MustCompile(`(?m)^lr: 0\.\d+`).MatchString(out) {
		t.Errorf("best says %q, run said %s", out, m[0])
	}
}

// profile measures a spec that has no profile section at all (on main: "SPEC:0:
// profile.iter_latency: is required … (from rubberband profile)"), writes NAME.profile.yaml
// beside it and names it in the spec, which then plans; simulate and whatif of a spec without a
// profile say what to run. A second profile measures into the same file.
func TestProfileWithoutAProfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	trainer := filepath.Join(dir, "train.sh")
	if err := os.WriteFile(trainer, []byte("#!/bin/sh\ni=$RB_START_ITER\nwhile [ $i -lt $RB_TARGET_ITER ]; do i=$((i+1)); sleep 0.01; "+
		"if [ \"$RANK\" = 0 ]; then echo \"@rb {\\\"iter\\\": $i, \\\"val_accuracy\\\": 0.5}\"; fi; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(dir, "job.yaml")
	text := "# my notes\nname: noprof\ndeadline: 10m\nobjective: {metric: val_accuracy}\nalgorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}\n" +
		"search_space: {lr: {type: loguniform, min: 0.001, max: 0.1}}\ntrainer: {command: [" + trainer + "]}\n" +
		"cluster: {gpus_per_node: 2, price_per_hour: 1, max_nodes: 2}\n"
	if err := os.WriteFile(specFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"simulate", specFile, "--alloc", "4,2"}, {"whatif", specFile, "--sweep", "deadline=5m,10m"}} {
		if out, errOut, code := rb(t, args...); code != 2 || !strings.Contains(errOut, "rubberband profile "+specFile) {
			t.Errorf("%s without a profile: exit %d\n%s%s", args[0], code, out, errOut)
		}
	}
	profile := []string{"profile", specFile, "--gpus", "1,2", "--iters", "2", "--rounds", "1"}
	if out, errOut, code := rb(t, profile...); code != 0 {
		t.Fatalf("profile: exit %d\n%s%s", code, out, errOut)
	}
	data, _ := os.ReadFile(specFile)
	if !strings.HasPrefix(string(data), text) || !strings.Contains(string(data[len(text):]), "profile: {file: job.profile.yaml}") {
		t.Errorf("the spec now reads:\n%s", data)
	}
	exp, err := spec.Load(specFile)
	if err != nil {
		t.Fatal(err)
	}
	if m := exp.Profile.IterLatency[2].Mean; !(m > 0) || exp.ProfileFile() != "job.profile.yaml" {
		t.Errorf("profile %+v from %q", exp.Profile, exp.ProfileFile())
	}
	if out, errOut, code := rb(t, "plan", specFile); code != 0 {
		t.Errorf("plan of the profiled spec: exit %d\n%s%s", code, out, errOut)
	}
	// Measured again: into the file the spec names; the spec is not touched.
	before, _ := os.Stat(filepath.Join(dir, "job.profile.yaml"))
	if out, errOut, code := rb(t, profile...); code != 0 || !strings.Contains(errOut, "wrote "+filepath.Join(dir, "job.profile.yaml")) {
		t.Fatalf("profile again: exit %d\n%s%s", code, out, errOut)
	}
	if again, _ := os.ReadFile(specFile); string(again) != string(data) {
		t.Errorf("profiling again changed the spec:\n%s", again)
	}
	if after, _ := os.Stat(filepath.Join(dir, "job.profile.yaml")); !after.ModTime().After(before.ModTime()) && after.Size() == before.Size() {
		t.Error("the profile was not measured again")
	}
	// A spec that names a profile file not written yet (on main profile refused it, "cannot read
	// profile: ... no such file"): plan says to measure it, profile writes it there (its folder
	// made), plan plans.
	named := filepath.Join(dir, "named.yaml")
	if err := os.WriteFile(named, []byte(text+"profile: {file: measured/named.yaml}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := rb(t, "plan", named); code != 2 || !strings.Contains(errOut, "named.yaml:9: profile.file: measured/named.yaml does not exist yet") ||
		!strings.Contains(errOut, "rubberband profile "+named) {
		t.Errorf("plan before profiling: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := rb(t, "profile", named, "--gpus", "1,2", "--iters", "2", "--rounds", "1"); code != 0 || !strings.Contains(errOut, "wrote "+filepath.Join(dir, "measured", "named.yaml")) {
		t.Fatalf("profile into the named file: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := rb(t, "plan", named); code != 0 {
		t.Errorf("plan after profiling: exit %d\n%s%s", code, out, errOut)
	}
}

// `init SCRIPT`, as a user types it first: from the folder above, among two scripts, the spec
// goes beside the named one and runs it, and validates; a missing script or two arguments exit 2.
func TestInitNamesItsScript(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	dir := filepath.Join(top, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"prep.py", "train.py"} {
		if err := os.WriteFile(filepath.Join(dir, f), trainerFromDocs(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := rbIn(t, top, "init", "proj/train.py")
	spec := filepath.Join("proj", "rubberband.yaml")
	if code != 0 || !strings.Contains(out, "wrote "+spec+": python3 train.py") || !strings.Contains(out, "rubberband profile "+spec) {
		t.Fatalf("init proj/train.py: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := rbIn(t, top, "validate", spec); code != 0 {
		t.Fatalf("validate: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"init", "--force", "proj/nope.py"}, {"init", "--force", "proj/train.py", "proj/prep.py"}} {
		if out, errOut, code := rbIn(t, top, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, errOut)
		}
	}
}
