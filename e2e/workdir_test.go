package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
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

// scriptSpec is a 1-GPU SHA run of train.py beside it, planned from a profile of milliseconds;
// Debian's python3 runs it, which a server's sandboxed trainers can reach (a pyenv shim under
// /root they could not).
const scriptSpec = `name: script
deadline: 10m
seed: 3
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}
search_space:
  x: {type: uniform, min: 0, max: 1}
trainer: {command: [/usr/bin/python3, train.py]WORKDIR}
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

// A notebook user's first run on a server: the Python client (Debian's python3, standard
// library) submits a spec whose trainer, train.py, is in a folder of the user's that the server
// never sees (removed before the run starts), and the run finishes with a winner; a second
// submission of the unchanged folder does not send it again. Before, the server ran python3
// train.py in its own folder and every trial failed (can't open file …/train.py). The same
// client submits examples/digits-mlp.yaml, which names its profile in flow style
// (profile: {file: …}): it was refused with 422 "profiles/digits-mlp.yaml was not sent".
func TestPythonClientSendsTheTrainersCode(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--root", root); code != 0 {
		t.Fatal(errOut)
	}
	token, errOut, code := rb(t, "server", "users", "add", "ann", "--team", "ml", "--root", root)
	if code != 0 {
		t.Fatal(errOut)
	}
	srv := startServer(t, "--root", root, "--time-scale", "0.05")
	file := scriptFolder(t, "")
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), ".rbignore"), []byte("data/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(filepath.Dir(file), "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "data", "big.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	py := exec.Command("/usr/bin/python3", "-c", `
import os, shutil, sys
from rubberband import Client
c = Client()
spec = sys.argv[1]
folder = os.path.dirname(spec)
r = c.submit(spec)
c.send_code(folder)  # unchanged: the server has it, nothing is sent
# The folder goes: the server must have its own copy.
shutil.rmtree(folder)
r = r.wait(timeout=120)
assert r.state == "finished", r.fields
print("winner", r.best()["trial"])
d = c.submit("examples/digits-mlp.yaml")
print("digits", d.state)
d.cancel()
`, file)
	py.Dir = ".."
	py.Env = append(os.Environ(), "RUBBERBAND_SERVER="+srv.base, "RUBBERBAND_TOKEN="+strings.TrimSpace(token), "PYTHONPATH=python")
	out, err := py.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^winner \S+$`).Match(out) || !regexp.MustCompile(`(?m)^digits (queued|running)$`).Match(out) {
		logs, _ := filepath.Glob(filepath.Join(root, "teams", "ml", "*", "logs", "*.log"))
		logs, _ = filepath.Glob(filepath.Join(root, "teams", "ml", "*", "driver.log"))
		for _, l := range logs[:min(2, len(logs))] {
			t.Log(l, string(readFileBytes(l)))
		}
		t.Fatalf("python client: %v\n%s\n%s", err, out, srv.log)
	}
	// Each folder was sent once (the audit records each upload), and the team's bundles hold
	// train.py, not the ignored data.
	ann, err := client.New(srv.base, strings.TrimSpace(token))
	if err != nil {
		t.Fatal(err)
	}
	audit, err := ann.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	uploads := 0
	for _, e := range audit {
		if e.Action == "code" {
			uploads++
		}
	}
	if uploads != 2 {
		t.Errorf("%d uploads of code, want 2 (the script's folder once, examples/ once): %+v", uploads, audit)
	}
	bundles, _ := filepath.Glob(filepath.Join(root, "teams", "ml", "code", "*.tar.gz"))
	if len(bundles) != 2 { // the script's folder and examples/
		t.Fatalf("the team holds %d bundles, want 2: %v", len(bundles), bundles)
	}
	for _, b := range bundles {
		if st, err := os.Stat(b); err != nil || st.Size() > 1<<20 {
			t.Errorf("bundle %s: %v (the ignored 1 MiB of data/ was sent?)", b, err)
		}
	}
}

// On Nomad the workers share no folder with the driver: the trainer's code goes through the
// run's checkpoint store (MinIO here, under the run's prefix), and each worker fetches it and
// runs train.py in it. Before, raw_exec ran python3 train.py in the task's own folder, where
// there is no train.py.
func TestRunScriptOnNomadWithMinIO(t *testing.T) {
	t.Parallel()
	nomadBin := servers.Binary(t, "nomad", "RB_NOMAD_BIN")
	minio := servers.RunMinIO(t)
	file := scriptFolder(t, "")
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "checkpoints: {url: s3://checkpoints/code-e2e, endpoint: %s, insecure: true}\n", minio.Endpoint)
	f.Close()
	// The workers' credentials, as an AMI could hold them: in a file (Nomad's environment
	// denylist keeps AWS_ACCESS_KEY_ID from raw_exec tasks).
	creds := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(creds, []byte(fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", minio.AccessKey, minio.Secret)), 0o600)
	state := filepath.Join(t.TempDir(), "state")
	cmd := exec.Command(binary, "run", file, "--backend", "nomad", "--state", state, "--time-scale", "0.05", "-o", "json")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "RB_NOMAD_BIN="+nomadBin, "NOMAD_ADDR=", "AWS_SHARED_CREDENTIALS_FILE="+creds,
		"AWS_ACCESS_KEY_ID="+minio.AccessKey, "AWS_SECRET_ACCESS_KEY="+minio.Secret)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); !ranToEnd(err) {
		t.Fatalf("run on nomad: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"best"`) {
		t.Fatalf("no best trial:\n%s\n%s", stdout.String(), stderr.String())
	}
	if !regexp.MustCompile(`trainer code \S+: 2 files, .* shipped to the run's checkpoint store`).MatchString(stderr.String()) {
		t.Errorf("the driver did not say it shipped the code:\n%s", stderr.String())
	}
}

// syntheticSource is testdata/synthetic.yaml with its trainer's --spec made absolute: a copy of
// it elsewhere (a temporary folder, a server's code bundle) still finds the spec its synthetic
// trainer follows, now that the trainer runs in the copy's folder.
func syntheticSource() ([]byte, error) {
	src, err := os.ReadFile("testdata/synthetic.yaml")
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs("testdata/synthetic.yaml")
	if err != nil {
		return nil, err
	}
	return []byte(strings.ReplaceAll(string(src), "--spec, synthetic.yaml]", "--spec, "+abs+"]")), nil
}

// The Python client packs a folder as the Go CLI does: the same files (ignore rules, links,
// .rubberband and .git left out) and the same ID, so that the server keeps one bundle whichever
// sent it; and without PyYAML it still finds a flow-style profile file (profile: {file: …}),
// which its old line reading took for the key profile.
func TestPythonClientPacksAsTheCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"train.py": "print(1)\n", "lib/model.py": "m\n", "lib/cache.pyc": "c", "data/big.bin": "d", "keep.log": "k", "run.log": "r",
		".rubberband/x/journal.jsonl": "j", ".git/HEAD": "h", "docs/deep/a.tmp": "t", "run.sh": "#!/bin/sh\n",
		".gitignore": "*.pyc\ndata/\n*.log\n!keep.log\n", ".rbignore": "docs/**/*.tmp\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(dir, "run.sh"), 0o755)
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	m, err := codebundle.Scan(dir, codebundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	py := exec.Command("/usr/bin/python3", "-c", `
import sys
sys.modules["yaml"] = None  # as where PyYAML is not installed
from rubberband import client, codebundle
files = codebundle.scan(sys.argv[1])
print(codebundle.bundle_id(files), len(files))
print(client._file_refs(open("examples/digits-mlp.yaml").read()))
`, dir)
	py.Dir = ".."
	py.Env = append(os.Environ(), "PYTHONPATH=python")
	out, err := py.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	want := fmt.Sprintf("%s %d\n['profiles/digits-mlp.yaml']\n", m.SHA256, len(m.Files))
	if string(out) != want {
		t.Fatalf("python says\n%swant\n%s", out, want)
	}
}

// A trainer's folder over the cap is refused before anything is sent, naming its largest file
// and .rbignore, with exit 2; the file listed in .rbignore, the folder passes the check (and
// the submission goes on to the server, absent here).
func TestRunServerRefusesATooLargeFolder(t *testing.T) {
	t.Parallel()
	file := scriptFolder(t, "")
	dir := filepath.Dir(file)
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	big, err := os.Create(filepath.Join(dir, "data", "train.bin"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(codebundle.DefaultMaxBytes + 1) // sparse: no disk used
	big.Close()
	env := []string{"RUBBERBAND_SERVER=http://127.0.0.1:1", "RUBBERBAND_TOKEN=rbt_x"}
	_, errOut, code := rbEnv(t, binary, env, "run", file, "--detach")
	if code != 2 || !strings.Contains(errOut, "data/train.bin (100.0 MiB)") || !strings.Contains(errOut, filepath.Join(dir, ".rbignore")) {
		t.Fatalf("exit %d, want 2 naming the file and .rbignore:\n%s", code, errOut)
	}
	os.WriteFile(filepath.Join(dir, ".rbignore"), []byte("data/\n"), 0o644)
	if _, errOut, code := rbEnv(t, binary, env, "run", file, "--detach"); code == 2 || strings.Contains(errOut, "too large") {
		t.Fatalf("with data/ ignored: exit %d:\n%s", code, errOut)
	}
}
