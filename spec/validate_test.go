package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// validBase is a valid spec, one top-level field per line, that withField edits.
const validBase = `name: x
objective: {metric: m}
algorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}
cluster: {gpus_per_node: 2, price_per_hour: 1}
profile: {iter_latency: {1: {mean: 1}}}
`

// withField replaces the line of validBase for line's top-level field, or adds it.
func withField(line string) string {
	key, _, _ := strings.Cut(line, ":")
	var out []string
	found := false
	for _, l := range strings.Split(strings.TrimSuffix(validBase, "\n"), "\n") {
		if strings.HasPrefix(l, key+":") {
			l, found = line, true
		}
		out = append(out, l)
	}
	if !found {
		out = append(out, line)
	}
	return strings.Join(out, "\n") + "\n"
}

func problems(t *testing.T, err error) Problems {
	t.Helper()
	if err == nil {
		return nil
	}
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("want Problems, got %T %v", err, err)
	}
	return probs
}

// A type error, an unknown field and a duplicate key do not hide the ten invalid values: all
// thirteen come out in one pass, sorted by line, each with its file, line and path.
func TestEveryProblemInOnePass(t *testing.T) {
	const file = "testdata/invalid/every-problem.yaml"
	_, err := Load(file)
	probs := problems(t, err)
	want := []struct {
		line int
		path string
	}{
		{3, "name"},
		{4, "deadline"},
		{5, "objective.mode"},
		{7, "algorithm.sha.trials"},
		{9, "search_space.lr.type"},
		{12, "trainer.env.MY VAR"},
		{14, "cluster.gpus_per_node"}, // "two": the type error, and no "0 is out of range" after it
		{15, "cluster.price_per_hour"},
		{16, "cluster.colour"},    // unknown field
		{18, "cluster.max_nodes"}, // given twice: its first value, 0, is not judged
		{19, "cluster.network_gbps"},
		{20, "cluster.data.price_per_gb"},
		{24, "planner.samples"},
	}
	if len(probs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(probs), len(want), err)
	}
	for i, w := range want {
		p := probs[i]
		if p.File != file || p.Line != w.line || p.Path != w.path || p.Msg == "" {
			t.Errorf("problem %d is %q, want %s:%d: %s: ...", i, p, file, w.line, w.path)
		}
	}
	if !strings.Contains(probs[6].Msg, `"two" is not an integer`) || !strings.Contains(probs[9].Msg, "given twice") ||
		!strings.Contains(probs[8].Msg, "unknown field") || !strings.Contains(probs[7].Msg, "1e+308 is out of range") {
		t.Errorf("messages:\n%v", err)
	}
}

// A field that failed to decode is reported once: no check of its zero value, no default in its
// place, no check of what depends on it.
func TestNoFollowOnProblems(t *testing.T) {
	for _, tc := range []struct{ line, path string }{
		{"cluster: {gpus_per_node: two, price_per_hour: 1}", "cluster.gpus_per_node"},
		{"cluster: {gpus_per_node: 2, price_per_hour: cheap}", "cluster.price_per_hour"},
		{"cluster: {gpus_per_node: 2, price_per_hour: 1, market: [spot]}", "cluster.market"},
		{"cluster: {gpus_per_node: 2, price_per_hour: 1, billing: {model: 3s, increment: 1s}}", ""}, // "3s" decodes as a string: a real problem
		{"cluster: {gpus_per_node: 2, price_per_hour: 1, scale_latency: {dist: [uniform], min: 1, mean: 2}}", "cluster.scale_latency.dist"},
		{"cluster: {gpus_per_node: 2, price_per_hour: 1, data: {size_gb: 1}, network_gbps: fast}", "cluster.network_gbps"},
		{"cluster: [gpus_per_node, price_per_hour]", "cluster"},
		{"cluster: {instance_type: [p3.8xlarge]}", "cluster.instance_type"},
		{"planner: {samples: many}", "planner.samples"},
		{"planner: {name: [greedy]}", "planner.name"},
		{"objective: {metric: m, mode: [max]}", "objective.mode"},
		{"algorithm: {hyperband: {min_iters: 1, max_iters: 81, eta: three}}", "algorithm.hyperband.eta"},
		{"algorithm: {stages: [{trials: 4, iters: 1}, {trials: lots, iters: 1}]}", "algorithm.stages[1].trials"},
		{"search_space: {lr: {type: int, min: one, max: 3.5}}", "search_space.lr.min"},
		{"profile: {iter_latency: {one: {mean: 1}}}", "profile.iter_latency.one"},
		{"profile: {iter_latency: {1: slow}}", "profile.iter_latency.1"},
		{"profile: {iter_latency: {1: {mean: 1}, 01: {mean: 2}}}", "profile.iter_latency.01"},
		{"trainer: {command: python3 train.py}", "trainer.command"},
		{"trainer: {command: [python3, train.py], workdir: [src]}", "trainer.workdir"},
		{"trainer: {command: [python3, train.py], workdir: ''}", "trainer.workdir"},
		{"deadline: soon", "deadline"},
	} {
		_, err := Parse("a.yaml", []byte(withField(tc.line)), nil)
		probs := problems(t, err)
		if tc.path == "" {
			if len(probs) != 1 || probs[0].Path != "cluster.billing.model" {
				t.Errorf("%s: want one problem at cluster.billing.model, got\n%v", tc.line, err)
			}
			continue
		}
		if len(probs) != 1 || probs[0].Path != tc.path || probs[0].Line < 1 {
			t.Errorf("%s: want one problem at %s, got\n%v", tc.line, tc.path, err)
		}
	}
	// Duplicates: the field is reported as given twice, whichever value is bad.
	_, err := Parse("a.yaml", []byte("name: x\n"+validBase), nil)
	if probs := problems(t, err); len(probs) != 1 || probs[0].Line != 2 || probs[0].Msg != "given twice" {
		t.Errorf("duplicate name: %v", err)
	}
}

// An unknown instance type is one problem: the fields it would have filled are not then
// reported as missing; fields the spec wrote are still checked.
func TestUnknownInstanceTypeIsOneProblem(t *testing.T) {
	_, err := Parse("a.yaml", []byte(withField("cluster: {instance_type: p9.huge, market: spot, data: {size_gb: 1}}")), nil)
	probs := problems(t, err)
	if len(probs) != 1 || probs[0].Path != "cluster.instance_type" || !strings.Contains(probs[0].Msg, `unknown instance type "p9.huge"`) {
		t.Fatalf("want one problem about the instance type, got\n%v", err)
	}
	_, err = Parse("a.yaml", []byte(withField("cluster: {instance_type: p9.huge, gpus_per_node: 0}")), nil)
	if probs := problems(t, err); len(probs) != 2 || probs[1].Path != "cluster.gpus_per_node" {
		t.Fatalf("a written gpus_per_node is still checked:\n%v", err)
	}
}

// A problem about a profile file's field is located in that file, and one the spec left out
// under a written profile field at that field's line there.
func TestProfileProblemsPointIntoTheProfile(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(withField("profile: {file: p.yaml}")), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("iter_latency:\n  1: {mean: 1}\n  2: {dist: uniform, max: -1}\n"), 0o644))
	_, err := Load(filepath.Join(dir, "s.yaml"))
	probs := problems(t, err)
	if len(probs) != 1 || probs[0].File != "p.yaml" || probs[0].Line != 3 || probs[0].Path != "profile.iter_latency.2.max" {
		t.Fatalf("%v", err)
	}
}

func TestFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{MaxFileSize + 1, 1 << 30} {
		// Sparse: reading it whole would take 1 GiB of memory and seconds; the stat refuses it.
		path := filepath.Join(dir, "big.yaml")
		must(t, os.WriteFile(path, nil, 0o644))
		must(t, os.Truncate(path, size))
		start := time.Now()
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s is %d bytes, above the limit of 4194304 bytes (4 MiB)", path, size)) {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("refusing %d bytes took %v", size, d)
		}
	}
	path := filepath.Join(dir, "max.yaml")
	must(t, os.WriteFile(path, nil, 0o644))
	must(t, os.Truncate(path, MaxFileSize))
	if data, err := ReadFile(path); err != nil || len(data) != MaxFileSize {
		t.Fatalf("a file of exactly MaxFileSize: %d bytes, %v", len(data), err)
	}
	// In memory too, before the YAML parser sees it.
	_, err := Parse("big.yaml", make([]byte, MaxFileSize+1), nil)
	if probs := problems(t, err); len(probs) != 1 || !strings.Contains(probs[0].Msg, "more than the 4194304 (4 MiB)") {
		t.Fatalf("%v", err)
	}
}

// Only regular files are read: a FIFO (whose open would block), a device, a directory are
// refused by name; a symbolic link to a spec is fine.
func TestOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "spec.fifo")
	must(t, syscall.Mkfifo(fifo, 0o644))
	link := filepath.Join(dir, "link.yaml")
	full, err := filepath.Abs("testdata/full.yaml")
	must(t, err)
	must(t, os.Symlink(full, link))
	for _, tc := range []struct{ path, want string }{
		{fifo, "is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "is a character device, not a regular file"},
		{dir, "is a directory, not a regular file"},
		{link, ""},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(tc.path)
			done <- err
		}()
		select {
		case err := <-done:
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.path+" "+tc.want)) {
				t.Errorf("%s: %v", tc.path, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Load blocked", tc.path)
		}
	}
	// A profile file that is a FIFO is one problem, not a hang and not a missing profile.
	must(t, os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(withField("profile: {file: spec.fifo}")), 0o644))
	_, err = Load(filepath.Join(dir, "s.yaml"))
	if probs := problems(t, err); len(probs) != 1 || probs[0].Path != "profile.file" || !strings.Contains(probs[0].Msg, "not a regular file") {
		t.Fatalf("%v", err)
	}
}

// Every limit takes its bound and refuses what lies beyond it, naming the field.
func TestFiniteLimits(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	values := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("1, ", n), ", ") + "]" }
	stages := func(n, trials, iters int) string {
		s := strings.TrimSuffix(strings.Repeat("{trials: "+strconv.Itoa(trials)+", iters: "+strconv.Itoa(iters)+"}, ", n), ", ")
		return "algorithm: {stages: [" + s + "]}"
	}
	cluster := func(extra string) string { return "cluster: {gpus_per_node: 2, price_per_hour: 1, " + extra + "}" }
	for _, tc := range []struct{ line, path string }{
		{"name: " + long(MaxNameLen), ""},
		{"name: " + long(MaxNameLen+1), "name"},
		{"name: " + long(200000), "name"},
		{"deadline: 8760h", ""},
		{"deadline: 8761h", "deadline"},
		{"cluster: {gpus_per_node: 2, price_per_hour: 100000}", ""},
		{"cluster: {gpus_per_node: 2, price_per_hour: 100001}", "cluster.price_per_hour"},
		{"cluster: {gpus_per_node: 2, price_per_hour: 1e308}", "cluster.price_per_hour"},
		{cluster("spot_price_per_hour: 100001"), "cluster.spot_price_per_hour"},
		{cluster("network_gbps: 100000"), ""},
		{cluster("network_gbps: 100001"), "cluster.network_gbps"},
		{cluster("network_gbps: 1e-300"), "cluster.network_gbps"},
		{cluster("data: {size_gb: 1000000, price_per_gb: 1000}, network_gbps: 0.001"), ""},
		{cluster("data: {size_gb: 1, price_per_gb: 1001}, network_gbps: 1"), "cluster.data.price_per_gb"},
		{cluster("data: {size_gb: 1e308}, network_gbps: 1"), "cluster.data.size_gb"},
		{"search_space: {" + long(MaxParamNameLen) + ": {type: uniform, min: 0, max: 1}}", ""},
		{"search_space: {" + long(MaxParamNameLen+1) + ": {type: uniform, min: 0, max: 1}}", "search_space." + long(MaxParamNameLen+1)},
		{"search_space: {a.b: {type: uniform, min: 0, max: 1}}", "search_space.a.b"},
		{"search_space: {1x: {type: uniform, min: 0, max: 1}}", "search_space.1x"},
		{"search_space: {x: {type: uniform, min: -1e308, max: 1e308}}", "search_space.x"},
		{"search_space: {x: {type: choice, values: " + values(MaxChoiceValues) + "}}", ""},
		{"search_space: {x: {type: choice, values: " + values(MaxChoiceValues+1) + "}}", "search_space.x.values"},
		{"trainer: {command: [a], env: {" + long(MaxEnvKeyLen) + ": x}}", ""},
		{"trainer: {command: [a], env: {" + long(MaxEnvKeyLen+1) + ": x}}", "trainer.env." + long(MaxEnvKeyLen+1)},
		{"trainer: {command: [a], env: {A: " + long(MaxTrainerBytes) + "}}", "trainer"},
		{"trainer: {command: [" + long(MaxTrainerBytes-1) + "]}", ""},
		{"trainer: {command: [" + long(MaxTrainerBytes+1) + "]}", "trainer"},
		{`trainer: {command: [a], env: {A: "x\0y"}}`, "trainer.env.A"},
		{`trainer: {command: ["a\0"]}`, "trainer.command[0]"},
		{stages(MaxStages, 1, 1), ""},
		{stages(MaxStages+1, 1, 1), "algorithm.stages"},
		{stages(2, 1, MaxIters/2+1), "algorithm.stages"},
		{stages(2, MaxTrials, 1), ""},
		{stages(3, MaxTrials, 1), "algorithm.stages"},
		{"algorithm: {sha: {trials: 1000001, min_iters: 1, max_iters: 4, eta: 2}}", "algorithm.sha.trials"},
		{"algorithm: {hyperband: {min_iters: 1, max_iters: 1000000000, eta: 2}}", "algorithm.hyperband"},
	} {
		_, err := Parse("a.yaml", []byte(withField(tc.line)), nil)
		probs := problems(t, err)
		name := tc.line
		if len(name) > 80 {
			name = name[:80] + "..."
		}
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: refused:\n%.500v", name, err)
		case tc.path != "" && (len(probs) != 1 || probs[0].Path != tc.path):
			t.Errorf("%s: want one problem at %.100s, got\n%.500v", name, tc.path, err)
		}
	}
}
