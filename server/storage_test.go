package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Where a team's runs may keep and read data, case by case: under its prefixes by whole
// segments, never by '..', nor through a symlink into the server's root, nor in the root.
func TestCheckStorage(t *testing.T) {
	dir := t.TempDir()
	root, shared := filepath.Join(dir, "root"), filepath.Join(dir, "shared")
	for _, d := range []string{root, filepath.Join(shared, "ml")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(root, filepath.Join(shared, "ml", "into-root")); err != nil {
		t.Fatal(err)
	}
	team := store.Team{Name: "ml", StoragePrefixes: []string{"file://" + filepath.Join(shared, "ml"), "s3://ckpts/ml", "file://" + root + "/teams/ml"}}
	for url, says := range map[string]string{
		"":                                     "",
		"file://" + shared + "/ml":             "",
		"file://" + shared + "/ml/exp/1":       "",
		"s3://ckpts/ml/exp":                    "",
		"s3://ckpts/ml":                        "",
		"s3://ckpts/mlx":                       "not under team ml's storage prefixes",
		"s3://other/ml":                        "not under team ml's storage prefixes",
		"s3://ckpts/ml/../cv":                  "'..'",
		"file://" + shared + "/mlx":            "not under team ml's storage prefixes",
		"file://" + shared + "/ml/../cv":       "'..'",
		"file://" + shared + "/ml/into-root/x": "inside this server's root",
		"file://" + root + "/teams/ml/r1":      "inside this server's root", // even under a prefix
		"file://" + dir:                        "inside this server's root", // the root is inside it
		"file://relative/dir":                  "not an absolute path",
	} {
		exp := &spec.Experiment{File: "spec.yaml", Checkpoints: spec.Checkpoints{URL: url}}
		err := CheckStorage(team, root, exp)
		switch {
		case says == "" && err != nil:
			t.Errorf("%q: %v", url, err)
		case says != "" && (err == nil || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "checkpoints.url")):
			t.Errorf("%q: %v, want checkpoints.url: ...%s", url, err, says)
		}
	}
	exp := &spec.Experiment{File: "spec.yaml"}
	exp.Sampler.WarmStart = []string{"r20261128-041749-bb619d22", "earlier-exp", "..", root + "/teams/cv/r1", shared + "/ml/old-run"}
	err := CheckStorage(team, root, exp)
	probs, _ := err.(spec.Problems)
	if len(probs) != 2 || probs[0].Path != "sampler.warm_start[2]" || probs[1].Path != "sampler.warm_start[3]" {
		t.Fatalf("warm starts: %v", err)
	}
	// A team without prefixes keeps its checkpoints in its runs' folders only.
	exp = &spec.Experiment{File: "spec.yaml", Checkpoints: spec.Checkpoints{URL: "s3://ckpts/ml"}}
	if err := CheckStorage(store.Team{Name: "cv"}, root, exp); err == nil || !strings.Contains(err.Error(), "team cv has no storage prefixes") {
		t.Fatalf("a team without prefixes: %v", err)
	}
}

// A change gives only what it names; a prefix that is not one is refused by CheckTeam.
func TestTeamChange(t *testing.T) {
	budget, prefixes := 5.0, []string{"s3://ckpts/ml"}
	got := TeamChange{MonthlyBudgetUSD: &budget, StoragePrefixes: &prefixes}.Apply(store.Team{Name: "ml", MaxGPUs: 4, MaxNodes: 2, MaxQueuedRuns: 3})
	if got.MaxGPUs != 4 || got.MaxNodes != 2 || got.MaxQueuedRuns != 3 || got.MonthlyBudgetUSD != 5 || len(got.StoragePrefixes) != 1 {
		t.Fatalf("after a budget change: %+v", got)
	}
	for _, bad := range []string{"ml-bucket", "file://rel", "s3://ckpts/a/../b", "http://x/y"} {
		if err := CheckTeam(store.Team{Name: "ml", StoragePrefixes: []string{bad}}); err == nil || !strings.Contains(err.Error(), "storage prefix") {
			t.Errorf("prefix %q: %v", bad, err)
		}
	}
}

// A link in a prefix that leads nowhere yet is refused: once its target is made it could be
// anywhere (another team's folder), so where a write under it lands is not known.
func TestResolvePathRefusesADanglingLink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "not-yet"), filepath.Join(dir, "later")); err != nil {
		t.Fatal(err)
	}
	if got, err := resolvePath(filepath.Join(dir, "later", "x")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("resolvePath through a dangling link = %q, %v; want refused", got, err)
	}
	if got, err := resolvePath(filepath.Join(dir, "missing", "x")); err != nil || got != filepath.Join(dir, "missing", "x") {
		t.Fatalf("resolvePath of a place not made yet = %q, %v", got, err)
	}
}
