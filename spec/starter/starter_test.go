package starter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/spec"
)

// The starting spec validates for every type of the catalog, with the type's GPUs and price
// filled in, marked as the catalog's, and no profile (which profile adds); every kind of
// distribution and the other algorithms are shown in comments.
func TestRenderValidatesForEveryType(t *testing.T) {
	for _, it := range spec.Catalog() {
		data, err := Render(Options{Name: "My Folder_2", Command: []string{"python3", "train.py"}, Script: "train.py", Type: it.Name,
			Catalog: spec.BuiltinCatalog(), Now: time.Unix(0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		exp, err := spec.Parse("rubberband.yaml", data, nil, spec.ProfileOptional())
		if err != nil {
			t.Fatalf("%s:\n%s\n%v", it.Name, data, err)
		}
		if exp.Name != "my-folder-2" || exp.Cluster.GPUsPerNode != it.GPUs || exp.Cluster.PricePerHour != it.PricePerHour ||
			!exp.MissingProfile() || exp.Deadline <= 0 || exp.Algorithm.SHA == nil || strings.Join(exp.Trainer.Command, " ") != "python3 train.py" {
			t.Fatalf("%s: %+v", it.Name, exp)
		}
		if exp.Cluster.ScaleLatency.Mean <= 0 || exp.Cluster.InitLatency.Value <= 0 {
			t.Errorf("%s: start-up latencies %+v %+v", it.Name, exp.Cluster.ScaleLatency, exp.Cluster.InitLatency)
		}
		if _, err := spec.Parse("rubberband.yaml", data, nil); err == nil {
			t.Errorf("%s: a spec without a profile planned", it.Name)
		}
		text := string(data)
		for _, want := range []string{fmt.Sprintf("catalog default: %d %s", it.GPUs, it.GPUModel), "type: uniform", "type: int", "type: choice", "type: loguniform", "when:",
			"# hyperband:", "# asha:", "rubberband profile rubberband.yaml"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: lacks %q", it.Name, want)
			}
		}
		for _, field := range []string{"gpus_per_node", "price_per_hour", "scale_latency", "init_latency"} {
			line := text[strings.Index(text, "  "+field+":"):]
			if line = line[:strings.IndexByte(line, '\n')]; !strings.Contains(line, "# catalog default") {
				t.Errorf("%s: %q is not marked as the catalog's", it.Name, line)
			}
		}
	}
	if _, err := Render(Options{Command: []string{"x"}, Type: "p3.99xlarge", Catalog: spec.BuiltinCatalog()}); err == nil {
		t.Error("an unknown type rendered")
	}
}

// A command's words that YAML would read as something else stay strings.
func TestRenderQuotesCommand(t *testing.T) {
	cmd := []string{"python3", "my script.py", "--flag", "yes", "a: b", "#x"}
	data, err := Render(Options{Command: cmd, Type: DefaultType, Catalog: spec.BuiltinCatalog()})
	if err != nil {
		t.Fatal(err)
	}
	exp, err := spec.Parse("s.yaml", data, nil, spec.ProfileOptional())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(exp.Trainer.Command, "|") != strings.Join(cmd, "|") {
		t.Errorf("command %q, want %q", exp.Trainer.Command, cmd)
	}
}

func TestFindScript(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindScript(dir); err == nil || !strings.Contains(err.Error(), "--command") {
		t.Errorf("empty folder: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "train.py"), nil, 0o644)
	os.Mkdir(filepath.Join(dir, "pkg.py"), 0o755) // a folder is no script
	if s, err := FindScript(dir); s != "train.py" || err != nil {
		t.Errorf("one script: %q %v", s, err)
	}
	os.WriteFile(filepath.Join(dir, "util.py"), nil, 0o644)
	if _, err := FindScript(dir); err == nil || !strings.Contains(err.Error(), "train.py, util.py") {
		t.Errorf("two scripts: %v", err)
	}
}

func TestExperimentName(t *testing.T) {
	for in, want := range map[string]string{"My_Project": "my-project", "...": "experiment", "a--b": "a--b", strings.Repeat("x", 70): strings.Repeat("x", 63)} {
		if got := ExperimentName(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// Create leaves an existing file alone unless forced.
func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rubberband.yaml")
	if err := Create(path, []byte("one\n"), false); err != nil {
		t.Fatal(err)
	}
	if err := Create(path, []byte("two\n"), false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("overwrote: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one\n" {
		t.Errorf("file now %q", b)
	}
	if err := Create(path, []byte("two\n"), true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two\n" {
		t.Errorf("forced: file %q", b)
	}
}

// AddProfileFile appends the line and keeps the rest byte for byte; a spec the line would
// break is left as it was, and the error says what to add.
func TestAddProfileFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	orig := "# my comment\nname: x   # kept\n"
	os.WriteFile(path, []byte(orig), 0o600)
	ok := func([]byte) error { return nil }
	if err := AddProfileFile(path, "s.profile.yaml", ok); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), orig) || !strings.Contains(string(b[len(orig):]), "profile: {file: s.profile.yaml}") {
		t.Errorf("spec now %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	os.WriteFile(path, []byte(orig), 0o600)
	err := AddProfileFile(path, "p.yaml", func([]byte) error { return os.ErrInvalid })
	if err == nil || !strings.Contains(err.Error(), "profile: {file: p.yaml}") {
		t.Errorf("broken: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Errorf("a failed check changed the spec: %q", b)
	}
}

// Scan finds the parameters a script reads and the metric it reports; the starting spec's
// search space and objective start from them, and still validate.
func TestScanSeedsTheSkeleton(t *testing.T) {
	for _, c := range []struct {
		text   string
		params []string
		metric string
		mode   string
	}{
		{`p = params["lr"]; w = params.get('width', 64); print("@rb " + json.dumps({"iter": i, "val_loss": l}))`, []string{"lr", "width"}, "val_loss", "min"},
		{"lr = float(t.params.get(\"lr\", 0.1))\ntrainer.report(it, val_accuracy=right / len(val))\n", []string{"lr"}, "val_accuracy", "max"},
		{"import os\nprint('hello')\n", nil, "", "max"},
	} {
		f := Scan(c.text)
		if strings.Join(f.Params, ",") != strings.Join(c.params, ",") || f.Metric != c.metric {
			t.Errorf("%q: %+v", c.text, f)
		}
		data, err := Render(Options{Command: []string{"python3", "t.py"}, Script: "t.py", Found: f, Type: DefaultType, Catalog: spec.BuiltinCatalog()})
		if err != nil {
			t.Fatal(err)
		}
		exp, err := spec.Parse("s.yaml", data, nil, spec.ProfileOptional())
		if err != nil {
			t.Fatalf("%s\n%v", data, err)
		}
		want := c.params
		if want == nil {
			want = []string{"lr"}
		}
		for _, p := range want {
			if _, ok := exp.SearchSpace[p]; !ok {
				t.Errorf("%q: no parameter %s in %v", c.text, p, exp.SearchSpace)
			}
		}
		if c.metric != "" && exp.Objective.Metric != c.metric || exp.Objective.Mode != c.mode {
			t.Errorf("%q: objective %+v", c.text, exp.Objective)
		}
	}
	if f := Scan(`hp["lr"]`); len(f.Params) != 1 || !scaleLike(f.Params[0]) || scaleLike("width") {
		t.Errorf("lr is searched on a log scale, width is not: %v", f)
	}
}
