package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// searchSpec is a tpe job on the curves benchmark (a conditional space), two Hyperband rounds,
// in virtual time; %s is the sampler block's extra fields.
const searchSpec = `name: %s
deadline: 2h
seed: 9
objective: {metric: loss, mode: min}
algorithm: {hyperband: {min_iters: 1, max_iters: 9, eta: 3, rounds: 2}}
sampler: {name: tpe, min_points: 3%s}
search_space:
  optimizer: {type: choice, values: [sgd, adam]}
  momentum: {type: uniform, min: 0, max: 0.99, when: {optimizer: sgd}}
  beta1: {type: uniform, min: 0.5, max: 0.999, when: {optimizer: adam}}
  lr: {type: loguniform, min: 1.0e-5, max: 1}
  batch: {type: int, min: 16, max: 512}
  dropout: {type: uniform, min: 0, max: 0.8}
  layers: {type: int, min: 1, max: 8}
  width: {type: choice, values: [64, 128]}
trainer:
  command: [rubberband, trainer, synthetic, --spec, spec.yaml]
  env: {RB_SYNTH_OBJECTIVE: curves}
cluster: {gpus_per_node: 4, price_per_hour: 12.24, max_nodes: 8}
profile: {iter_latency: {1: {mean: 30, std: 3}}, startup_latency: {value: 5s}}
planner: {name: greedy, samples: 50}
`

// Search through the CLI: plan says tpe's batches; a virtual run of a tpe job on a conditional
// space journals each trial's configuration with its first launch, holding only its active
// parameters; best prints the winner ready to reuse (YAML and JSON with its curve); report
// shows the importance table and draws search.png; validate and run resolve a warm start from
// the first run, say what it ignores, keep it in the run's directory, and change the run's
// first draws; search-bench prints regret tables.
func TestSearchThroughTheCLI(t *testing.T) {
	t.Parallel()
	root, dir := t.TempDir(), t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root}
	write := func(name, extra string) string {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(strings.Replace(strings.Replace(searchSpec, "%s", name, 1), "%s", extra, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("search-a", "")
	out, errOut, code := rbEnv(t, binary, env, "plan", a)
	if code != 0 || !regexp.MustCompile(`search +tpe draws 34 trials in \d+ batches .*, \d+ guided by its model \(which needs 6 results at one budget\)`).MatchString(out) {
		t.Fatalf("plan: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := rbEnv(t, binary, env, "run", a, "--backend", "virtual"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	runDir := filepath.Join(root, "search-a")
	events := readJournal(t, runDir)
	configs := journal.Configurations(events)
	if len(configs) != 34 {
		t.Fatalf("%d configurations journaled, want 34", len(configs))
	}
	for _, e := range events {
		if e.Ev == journal.EvTrial && e.Params != nil {
			t.Fatalf("trial %s drawn at the start, not at its launch", e.Trial)
		}
	}
	for id, c := range configs {
		_, momentum := c["momentum"]
		_, beta1 := c["beta1"]
		if momentum != (c["optimizer"] == "sgd") || beta1 != (c["optimizer"] == "adam") || len(c) != 7 {
			t.Fatalf("trial %s holds %v: not exactly its active parameters", id, c)
		}
	}

	yamlOut, errOut, code := rbEnv(t, binary, env, "best", "search-a")
	rep := readRunReport(t, runDir)
	if code != 0 || !strings.Contains(yamlOut, "trial "+rep.Best.Trial) || !strings.Contains(yamlOut, "optimizer: ") {
		t.Fatalf("best: exit %d\n%s%s", code, yamlOut, errOut)
	}
	jsonOut, _, _ := rbEnv(t, binary, env, "best", "search-a", "-o", "json")
	var best rundir.BestTrial
	if err := json.Unmarshal([]byte(jsonOut), &best); err != nil || best.Trial != rep.Best.Trial || best.Value != rep.Best.Metric ||
		!reflect.DeepEqual(best.Params, configs[best.Trial]) || len(best.Curve) != 9 || best.Curve[8].Value != best.Value {
		t.Fatalf("best -o json: %v\n%s", err, jsonOut)
	}

	plots := filepath.Join(t.TempDir(), "plots")
	report, errOut, code := rbEnv(t, binary, env, "report", "search-a", "--plots", plots)
	if code != 0 || !strings.Contains(report, "parameter importance") || !regexp.MustCompile(`(?m)^\s+lr\s+\d+\.\d%$`).MatchString(report) {
		t.Fatalf("report: exit %d\n%s%s", code, report, errOut)
	}
	if fi, err := os.Stat(filepath.Join(plots, "search.png")); err != nil || fi.Size() < 10_000 {
		t.Fatalf("search.png: %v", err)
	}

	// Warm start: from search-a, whose space lacks "depth" and holds "width", which b drops.
	b := write("search-b", ", warm_start: [search-a]")
	spec := strings.Replace(readFile(t, b), "  width: {type: choice, values: [64, 128]}\n", "  depth: {type: int, min: 1, max: 3}\n", 1)
	os.WriteFile(b, []byte(spec), 0o644)
	results := 0
	for _, e := range events {
		if e.Ev == journal.EvDone || (e.Ev == journal.EvFail && e.GaveUp) {
			results++
		}
	}
	out, errOut, code = rbEnv(t, binary, env, "validate", b)
	if code != 0 || !strings.Contains(out, "warm start: run search-a") || !strings.Contains(out, fmt.Sprintf("gives %d results", results)) ||
		!strings.Contains(out, "ignores width (not in this search space)") {
		t.Fatalf("validate: exit %d (want %d results)\n%s%s", code, results, out, errOut)
	}
	cold := write("search-c", "")
	os.WriteFile(cold, []byte(strings.NewReplacer(", warm_start: [search-a]", "", "name: search-b", "name: search-c").Replace(spec)), 0o644)
	for _, s := range []string{b, cold} {
		if _, errOut, code := rbEnv(t, binary, env, "run", s, "--backend", "virtual"); code != 0 {
			t.Fatalf("run %s: exit %d\n%s", s, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "search-b", rundir.WarmStartFile)); err != nil {
		t.Fatalf("the warm start is not kept with the run: %v", err)
	}
	warm, coldEvents := firstDraws(readJournal(t, filepath.Join(root, "search-b"))), firstDraws(readJournal(t, filepath.Join(root, "search-c")))
	if reflect.DeepEqual(warm, coldEvents) {
		t.Fatal("the warm start changed none of the first draws")
	}

	// search-bench, small: a table per objective with every sampler.
	out, errOut, code = rb(t, "search-bench", "--objectives", "branin", "--seeds", "2", "--rounds", "1", "--samplers", "random,tpe")
	if code != 0 || !strings.Contains(out, "branin, hyperband x1 rounds: 380 iterations a run, 2 seeds") || !regexp.MustCompile(`(?m)^tpe\s+\S`).MatchString(out) {
		t.Fatalf("search-bench: exit %d\n%s%s", code, out, errOut)
	}

	// search-bench objective: the losses Optuna's script asks for, a JSON line each.
	cmd := exec.Command(binary, "search-bench", "objective", "digits")
	cmd.Stdin = strings.NewReader(`{"params": {"lr": 0.05, "momentum": 0.9, "hidden": 16, "l2": 1e-5, "batch": 64}, "iter": 2, "max_iter": 27}` + "\n" +
		`{"params": {"lr": 0.05}, "iter": 0, "max_iter": 27}` + "\n")
	got, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if err != nil || len(lines) != 2 || !regexp.MustCompile(`^\{"value":0\.\d+\}$`).MatchString(lines[0]) || !strings.Contains(lines[1], `"error"`) {
		t.Fatalf("search-bench objective digits: %v\n%s", err, got)
	}
	if _, errOut, code := rb(t, "search-bench", "objective", "rosenbrock"); code != 2 || !strings.Contains(errOut, "rosenbrock") {
		t.Fatalf("an unknown benchmark: exit %d, %s", code, errOut)
	}
}

// firstDraws are the configurations of a journal's first ten draws, in order.
func firstDraws(events []journal.Event) []string {
	var out []string
	for _, e := range events {
		if e.Ev == journal.EvLaunch && e.Params != nil && len(out) < 10 {
			b, _ := json.Marshal(e.Params)
			out = append(out, string(b))
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// search-bench --plots DIR makes DIR (and its parents) before the work, as mkdir -p: on main a
// missing DIR did all the work, then exited 1 and lost the table. A chart that cannot be
// written (its name taken by a folder) is an error at the end, after the table is printed.
func TestSearchBenchPlotsFolder(t *testing.T) {
	t.Parallel()
	args := []string{"search-bench", "--objectives", "branin", "--seeds", "1", "--rounds", "1", "--samplers", "random"}
	dir := filepath.Join(t.TempDir(), "new", "plots")
	out, errOut, code := rb(t, append(args, "--plots", dir)...)
	if code != 0 || !regexp.MustCompile(`(?m)^random\s+\S`).MatchString(out) {
		t.Fatalf("missing --plots folder: exit %d\n%s%s", code, out, errOut)
	}
	if st, err := os.Stat(filepath.Join(dir, "search-branin.png")); err != nil || st.Size() == 0 {
		t.Fatalf("no chart: %v", err)
	}
	taken := t.TempDir()
	if err := os.Mkdir(filepath.Join(taken, "search-branin.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = rb(t, append(args, "--plots", taken)...)
	if code != 1 || !regexp.MustCompile(`(?m)^random\s+\S`).MatchString(out) || !strings.Contains(errOut, "search-branin.png") {
		t.Fatalf("a chart that cannot be written: exit %d\n%s%s", code, out, errOut)
	}
	// A --plots that cannot be a folder is refused before any work.
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if out, errOut, code = rb(t, append(args, "--plots", filepath.Join(file, "sub"))...); code != 2 || out != "" {
		t.Fatalf("--plots under a file: exit %d\n%s%s", code, out, errOut)
	}
}
