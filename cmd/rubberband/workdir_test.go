package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scriptTrainer is a trainer known only by its relative name, train.py: it reports each
// iteration up to the target and keeps a checkpoint, standard library only.
const scriptTrainer = `import json, os
start, target = int(os.environ["RB_START_ITER"]), int(os.environ["RB_TARGET_ITER"])
params = json.loads(os.environ["RB_PARAMS"])
for i in range(start + 1, target + 1):
    print("@rb " + json.dumps({"iter": i, "score": params["x"] * i}), flush=True)
with open(os.path.join(os.environ["RB_CHECKPOINT_DIR"], "iter"), "w") as f:
    f.write(str(target))
`

// scriptSpec is a 1-GPU SHA run of train.py beside it, planned from a profile of milliseconds.
const scriptSpec = `name: script
deadline: 10m
seed: 3
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}
search_space:
  x: {type: uniform, min: 0, max: 1}
trainer: {command: [python3, train.py]WORKDIR}
cluster:
  gpus_per_node: 2
  price_per_hour: 12
  billing: {minimum: 0s}
  scale_latency: {value: 0s}
  init_latency: {value: 0s}
  max_nodes: 1
profile:
  iter_latency: {1: {mean: 0.01, std: 0.001}}
  startup_latency: {value: 0s}
planner: {samples: 20}
`

// scriptFolder writes train.py and its spec into a fresh folder (the spec's trainer.workdir
// line replaced by workdir) and returns the spec's path.
func scriptFolder(t *testing.T, workdir string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte(scriptTrainer), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(scriptSpec, "WORKDIR", workdir, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// The trainer runs in its spec's folder, wherever run is started (the repository's root here):
// before trainer.workdir, python3 could not open train.py and every trial failed.
func TestRunFromAnotherFolderFindsTheTrainer(t *testing.T) {
	t.Parallel()
	file := scriptFolder(t, "")
	state := filepath.Join(t.TempDir(), "run")
	out, errOut, code := rb(t, "run", file, "--state", state, "--time-scale", "0.05", "-o", "json")
	if code != 0 {
		t.Fatalf("run from another folder: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, `"best"`) {
		t.Errorf("no best trial in the report:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(file), ".rubberband")); err == nil {
		t.Error("the run landed in the trainer's folder, not in --state")
	}
}

// trainer.workdir names another folder, relative to the spec's; one that is not there is a
// problem at its line, before anything is planned.
func TestRunWorkdirRelativeAndMissing(t *testing.T) {
	t.Parallel()
	file := scriptFolder(t, ", workdir: code")
	dir := filepath.Dir(file)
	_, errOut, code := rb(t, "run", file, "--state", filepath.Join(t.TempDir(), "run"), "--time-scale", "0.05")
	if code != 2 || !strings.Contains(errOut, file+":8: trainer.workdir: ") || !strings.Contains(errOut, filepath.Join(dir, "code")) {
		t.Fatalf("missing workdir: exit %d, want 2 and the field and line:\n%s", code, errOut)
	}
	if err := os.Mkdir(filepath.Join(dir, "code"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "train.py"), filepath.Join(dir, "code", "train.py")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rb(t, "run", file, "--state", filepath.Join(t.TempDir(), "run"), "--time-scale", "0.05"); code != 0 {
		t.Fatalf("workdir: code: exit %d\n%s", code, errOut)
	}
}
