package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rubberband-hpo/rubberband"

// The floors, lowest first. A package may import packages of its own floor or of lower ones,
// never of a higher one. Tests may import anything (a test of rundir runs executor/virtual).
const (
	leaves   = iota // utilities and contracts, on the standard library and outside modules
	model           // pure: data in, data out, no I/O (spec, sim, planner, placement, ...)
	parts           // what runs are made of: checkpoints, trainers, stores, pictures
	seams           // the run's record and contracts, the providers, the worker
	engine          // the control loop and the runtimes that still import it
	readers         // what reads a run: its folder, metrics
	driving         // what drives a run: opens its backend, runs it; the search benchmark
	fronts          // what users talk to: the dashboard, the team server and its client
	commands        // binaries, examples, end-to-end tests, the test kit
)

// floorName is a floor's name, for the arrows.
func floorName(floor int) string {
	return [...]string{"leaves", "model", "parts", "seams", "engine", "readers", "driving", "fronts", "commands"}[floor]
}

// floors places every package: the longest prefix (a package path, relative to the module,
// and everything under it) decides.
func floors() map[string]int {
	return map[string]int{
		// leaves
		"internal/format":   leaves,
		"internal/safefile": leaves,
		"internal/syncio":   leaves,
		"internal/term":     leaves,
		"internal/palette":  leaves,
		"internal/infra":    leaves,
		"internal/logcap":   leaves,
		"executor/clock":    leaves,
		"executor/cloud":    leaves, // the Provider contract (its providers: seams, below)
		"sim/meter":         leaves,
		"trial":             leaves, // the trainer contract (trial/rbtrain, trial/builtin: parts)
		"trial/codebundle":  leaves,
		"server/store":      leaves, // the store contract (sqlstore, storetest: parts)
		"internal/layers":   leaves,
		// model
		"spec":      model,
		"asha":      model,
		"search":    model,
		"sim":       model,
		"planner":   model,
		"placement": model,
		// parts
		"checkpoint":             parts,
		"trial/rbtrain":          parts,
		"trial/builtin":          parts, // the built-in trainers and their objectives
		"rundir/mirror":          parts,
		"server/store/sqlstore":  parts,
		"server/store/storetest": parts,
		"internal/charts":        parts, // pictures of the model's types: it reads no run
		// seams
		"executor/journal":            seams, // issue 38: the journal's events, file, tail, upgrade
		"executor/runstate":           seams, // issue 38: the fold and the views every reader uses
		"executor/gang":               seams, // issue 38: the Runtime contract (and gang/gangtest)
		"executor/heartbeat":          seams,
		"executor/cloud/ec2":          seams,
		"executor/cloud/local":        seams,
		"executor/cloud/nomadlocal":   seams,
		"executor/cloud/nomadpool":    seams,
		"executor/cloud/providertest": seams,
		"executor/worker":             seams,
		"executor/process":            seams, // runtimes: they import executor/gang, not the engine
		"executor/nomad":              seams,
		"executor/fake":               seams,
		"executor/profiler":           seams,
		// engine
		"executor":         engine,
		"executor/virtual": engine, // a world in virtual time that runs the engine
		// readers
		"rundir":           readers,
		"executor/metrics": readers,
		// driving
		"driver":         driving,
		"internal/bench": driving, // `rubberband search-bench`: runs executor/virtual's world
		// fronts
		"ui":     fronts,
		"server": fronts,
		// commands
		"cmd":              commands,
		"examples":         commands,
		"e2e":              commands, // issue 38: the end-to-end suite, building the binary once
		"internal/testkit": commands, // imported by tests only (TestTestKitIsForTests)
	}
}

// floorOf is the floor of the package at path (relative to the module) and the prefix that
// placed it; ok is false when no prefix does.
func floorOf(table map[string]int, path string) (floor int, prefix string, ok bool) {
	for p := path; ; {
		if f, found := table[p]; found {
			return f, p, true
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			return 0, "", false
		}
		p = p[:i]
	}
}

// pkg is what `go list -json` says of a package that the test reads.
type pkg struct {
	ImportPath string
	Imports    []string
}

// listPackages is every package of the module with its (non-test) imports of the module's
// own packages, by path relative to the module.
func listPackages(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		var own []string
		for _, imp := range p.Imports {
			if rel, ok := relative(imp); ok {
				own = append(own, rel)
			}
		}
		rel, _ := relative(p.ImportPath)
		pkgs[rel] = own
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: %s", len(pkgs), out)
	}
	return pkgs
}

// relative is path relative to the module, when it is one of the module's packages.
func relative(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// upward is every import of pkgs that climbs a floor of table, as arrows, and every package
// table does not place.
func upward(table map[string]int, pkgs map[string][]string) (arrows, unplaced []string) {
	for _, from := range slices.Sorted(maps.Keys(pkgs)) {
		ff, fp, ok := floorOf(table, from)
		if !ok {
			unplaced = append(unplaced, from)
			continue
		}
		for _, to := range pkgs[from] {
			tf, tp, ok := floorOf(table, to)
			if ok && tf > ff {
				arrows = append(arrows, fmt.Sprintf("%s (floor %d %s, by %q) -> %s (floor %d %s, by %q)",
					from, ff, floorName(ff), fp, to, tf, floorName(tf), tp))
			}
		}
	}
	return arrows, unplaced
}

// No package imports one on a higher floor, and every package has a floor.
func TestNoUpwardImports(t *testing.T) {
	arrows, unplaced := upward(floors(), listPackages(t))
	for _, a := range arrows {
		t.Errorf("upward import: %s", a)
	}
	for _, p := range unplaced {
		t.Errorf("%s has no floor: give it one in floors() (internal/layers)", p)
	}
}

// forTests says whether the package at path is for tests only: the test kit (test doubles,
// real servers for tests, make test's reader) and the contract suites every implementation of
// a contract runs (checkpoint/storetest, executor/runtimetest, providertest, mirrortest, ...).
func forTests(path string) bool {
	return strings.HasPrefix(path, "internal/testkit/") || strings.HasSuffix(filepath.Base(path), "test")
}

// What is for tests is imported by tests only: no package of the product imports it, but
// another such package and cmd/testreport (make test's reader of go test -json).
func TestTestKitIsForTests(t *testing.T) {
	for from, imports := range listPackages(t) {
		if forTests(from) || from == "cmd/testreport" {
			continue
		}
		for _, to := range imports {
			if forTests(to) {
				t.Errorf("%s imports %s, which is for tests only", from, to)
			}
		}
	}
}

// engineSplit says the executor root has been split (executor/journal, executor/runstate,
// executor/gang).
const engineSplit = true

// The readers of a run (rundir, ui, server, executor/metrics, charts) do not import the engine
// package, executor.
func TestReadersDoNotImportTheEngine(t *testing.T) {
	if !engineSplit {
		t.Skip("TODO(issue 38): switched on (engineSplit) once executor/journal, executor/runstate and executor/gang are merged")
	}
	// The packages that read a run but do not drive one: once the engine's journal, fold and
	// gang contract have packages of their own, they import those, never the engine itself.
	mustNotImportEngine := []string{"rundir", "ui", "server", "executor/metrics", "internal/charts"}
	pkgs := listPackages(t)
	for _, from := range mustNotImportEngine {
		if slices.Contains(pkgs[from], "executor") {
			t.Errorf("%s imports the engine (%s/executor): it reads a run through executor/journal and executor/runstate", from, module)
		}
	}
}

// The check itself: an import of a higher floor is an arrow named by both ends, an import of
// the same or a lower floor is none, the longest prefix places a package, and a package no
// prefix places is reported.
func TestUpwardFindsTheArrows(t *testing.T) {
	table := map[string]int{"a": leaves, "a/high": fronts, "b": model, "c": model}
	pkgs := map[string][]string{
		"a":        nil,
		"a/high/x": {"b", "a"}, // down: none
		"b":        {"c", "a"}, // the same floor, and down: none
		"c":        {"a/high/x"},
		"d":        {"a"},
	}
	arrows, unplaced := upward(table, pkgs)
	if want := []string{`c (floor 1 model, by "c") -> a/high/x (floor 7 fronts, by "a/high")`}; !slices.Equal(arrows, want) {
		t.Errorf("arrows %q, want %q", arrows, want)
	}
	if !slices.Equal(unplaced, []string{"d"}) {
		t.Errorf("unplaced %q, want [d]", unplaced)
	}
}
