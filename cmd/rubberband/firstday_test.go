package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
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
	doc, err := os.ReadFile("../../docs/trainers.md")
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
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir // first-day: cwd
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0") // no second's sleep at each exit of the -race build
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

// A data scientist's first day, from an empty folder, as docs/trainers.md walks it: write
// train.py, init (a spec that validates, without a profile), plan before a profile (told what
// to run, exit 2: on main the message was "SPEC:0: profile.iter_latency: is required"),
// profile (measured numbers, named in the spec), plan (a time and a cost), run (a winner),
// best (the winner's configuration).
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
	out = must("run", 0, "run", "rubberband.yaml", "--time-scale", "0.02")
	m := regexp.MustCompile(`best trial (b0-t\d+): val_accuracy ([0-9.]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("run names no winner:\n%s", out)
	}
	out = must("best", 0, "best", "toy-tuning")
	if !strings.Contains(out, "trial "+m[1]) || !regexp.MustCompile(`(?m)^lr: 0\.\d+`).MatchString(out) {
		t.Errorf("best says %q, run said %s", out, m[0])
	}
}
