package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rubberband-hpo/rubberband"

// The floors, lowest first, as docs/architecture.md's layers block numbers them. A package may
// import packages of its own floor or of lower ones, never of a higher one. Tests may import
// anything (a test of rundir runs executor/virtual).
const (
	leaves   = iota // utilities and contracts, on the standard library and outside modules
	model           // pure: data in, data out, no I/O (spec, sim, planner, placement, ...)
	parts           // what runs are made of: checkpoints, trainers, stores, pictures
	seams           // the run's record and contracts, the runtimes, the providers, the worker
	engine          // the control loop, and the world in virtual time that runs it
	readers         // what reads a run: its folder, metrics
	driving         // what drives a run: opens its backend, runs it; the search benchmark
	fronts          // what users talk to: the dashboard, the team server and its client
	commands        // binaries, examples, end-to-end tests, the test kit
)

// floorNames are the floors' names, lowest first, as the layers block writes them.
var floorNames = [...]string{"leaves", "model", "parts", "seams", "engine", "readers", "driving", "fronts", "commands"}

// floorName is a floor's name, for the arrows.
func floorName(floor int) string { return floorNames[floor] }

// architectureDoc is the page whose layers block is the table, relative to this package.
const architectureDoc = "../../docs/architecture.md"

// floors places every package by the layers block of docs/architecture.md: one line per floor,
// "N name: prefix prefix ...", each prefix a package path relative to the module that places
// it and everything under it (the longest prefix decides). The page and the test are one table.
func floors(t *testing.T) map[string]int {
	t.Helper()
	doc, err := os.ReadFile(architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	table, err := parseLayers(string(doc))
	if err != nil {
		t.Fatalf("%s: %v", architectureDoc, err)
	}
	return table
}

// parseLayers reads the layers block of a page: every floor once, by its number and its name,
// and no prefix twice.
func parseLayers(doc string) (map[string]int, error) {
	_, rest, ok := strings.Cut(doc, "```layers\n")
	if !ok {
		return nil, errors.New("no ```layers block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return nil, errors.New("the layers block does not end")
	}
	table := map[string]int{}
	seen := map[int]bool{}
	for i, line := range strings.Split(strings.TrimSpace(block), "\n") {
		head, prefixes, ok := strings.Cut(line, ":")
		var floor int
		var name string
		if _, err := fmt.Sscanf(head, "%d %s", &floor, &name); !ok || err != nil || floor < 0 || floor >= len(floorNames) || floorNames[floor] != name || seen[floor] {
			return nil, fmt.Errorf("layers line %d (%q): want \"N name: prefixes\", N a floor of %v, each once", i+1, line, floorNames)
		}
		seen[floor] = true
		for _, p := range strings.Fields(prefixes) {
			if _, dup := table[p]; dup {
				return nil, fmt.Errorf("layers line %d: %s is placed twice", i+1, p)
			}
			table[p] = floor
		}
	}
	if len(seen) != len(floorNames) {
		return nil, fmt.Errorf("the layers block has %d floors, want %d", len(seen), len(floorNames))
	}
	return table, nil
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
	arrows, unplaced := upward(floors(t), listPackages(t))
	for _, a := range arrows {
		t.Errorf("upward import: %s", a)
	}
	for _, p := range unplaced {
		t.Errorf("%s has no floor: give it one in the layers block of docs/architecture.md", p)
	}
}

// forTests says whether the package at path is for tests only: the test kit (test doubles,
// real servers for tests, make test's reader) and the contract suites every implementation of
// a contract runs (checkpoint/storetest, executor/gang/gangtest, providertest, mirrortest, ...).
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

// The readers of a run (rundir, ui, server, executor/metrics, charts) do not import the engine
// package, executor.
func TestReadersDoNotImportTheEngine(t *testing.T) {
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

// The page's block is read as it is written, and a block a reader could misread is refused.
func TestParseLayers(t *testing.T) {
	ok := "text\n```layers\n"
	for i := len(floorNames) - 1; i >= 0; i-- {
		ok += fmt.Sprintf("%d %s: p%d q%d/r\n", i, floorNames[i], i, i)
	}
	ok += "```\nmore\n"
	table, err := parseLayers(ok)
	if err != nil || table["p3"] != seams || table["q3/r"] != seams || table["p0"] != leaves || len(table) != 2*len(floorNames) {
		t.Fatalf("parseLayers = %v, %v", table, err)
	}
	for name, bad := range map[string]string{
		"no block":        "text",
		"a wrong name":    strings.Replace(ok, "3 seams", "3 seam", 1),
		"a floor twice":   strings.Replace(ok, "2 parts", "3 seams", 1),
		"a prefix twice":  strings.Replace(ok, "p2", "p1", 1),
		"a missing floor": strings.Replace(ok, "0 leaves: p0 q0/r\n", "", 1),
	} {
		if _, err := parseLayers(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
