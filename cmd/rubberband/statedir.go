package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A state directory is self-contained: it holds a copy of the spec and of the files it refers
// to (its profile), so that status, report and resume work when the original moves or vanishes.
const (
	specCopy  = "spec.yaml"
	filesCopy = "spec-files" // the files the spec refers to, by their position in Files
)

// runFile is what a state directory remembers of how its run was started.
type runFile struct {
	RunID      string  `json:"run_id"`
	Backend    string  `json:"backend"`
	Spec       string  `json:"spec"` // where the spec was read from (for the changed-original warning)
	SpecSHA256 string  `json:"spec_sha256"`
	TimeScale  float64 `json:"time_scale"`
	Samples    int     `json:"samples"`
	Seed       int64   `json:"seed"`
	// Files maps each file the spec refers to, by the name it uses, to its copy's name under
	// spec-files/.
	Files map[string]string `json:"files,omitempty"`
}

// state is a run's state directory, loaded.
type state struct {
	dir   string
	run   runFile
	exp   *spec.Experiment
	plan  *planner.Report
	alloc sim.Alloc
}

// copySpec copies the spec at path, and the profile file it names, into the state directory.
func copySpec(dir, path string, exp *spec.Experiment, rf *runFile) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("copy spec: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, specCopy), data); err != nil {
		return err
	}
	rf.Files = nil
	if ref := exp.Profile.File; ref != "" {
		src := ref
		if !filepath.IsAbs(src) {
			src = filepath.Join(filepath.Dir(path), ref)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("copy the spec's profile: %w", err)
		}
		name := "0-" + filepath.Base(ref)
		if err := os.MkdirAll(filepath.Join(dir, filesCopy), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, filesCopy, name), b); err != nil {
			return err
		}
		rf.Files = map[string]string{ref: name}
	}
	return nil
}

// loadSpecCopy loads the run's spec from the state directory's copy.
func loadSpecCopy(dir string, rf runFile) (*spec.Experiment, []byte, error) {
	path := filepath.Join(dir, specCopy)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) { // a state directory of before the copy: the original it names
		exp, err := spec.Load(rf.Spec)
		if err != nil {
			return nil, nil, err
		}
		data, _ = os.ReadFile(rf.Spec)
		return exp, data, nil
	}
	if err != nil {
		return nil, nil, err
	}
	exp, err := spec.Parse(path, data, func(ref string) ([]byte, error) {
		name, ok := rf.Files[ref]
		if !ok {
			return nil, fmt.Errorf("%s was not copied into the state directory", ref)
		}
		return os.ReadFile(filepath.Join(dir, filesCopy, name))
	})
	return exp, data, err
}

func openState(dir string) (*state, error) {
	abs, err := filepath.Abs(dir) // agents and workers need absolute paths
	if err != nil {
		return nil, err
	}
	dir = abs
	st := &state{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, usageErr("%s is not a run's state directory: %v", dir, err)
	}
	if err := json.Unmarshal(b, &st.run); err != nil {
		return nil, fmt.Errorf("read run.json: %w", err)
	}
	if st.exp, _, err = loadSpecCopy(dir, st.run); err != nil {
		return nil, usageErr("load the run's spec: %v", err)
	}
	st.exp.Seed, st.exp.Planner.Samples = st.run.Seed, st.run.Samples
	f, err := os.Open(filepath.Join(dir, "plan.json"))
	if err != nil {
		return nil, fmt.Errorf("open plan: %w", err)
	}
	defer f.Close()
	if st.plan, err = planner.ReadReport(f); err != nil {
		return nil, err
	}
	if st.alloc, err = st.plan.Alloc(st.exp.Algorithm.Brackets()); err != nil {
		return nil, fmt.Errorf("the run's plan: %w", err)
	}
	return st, nil
}

// lineDiff is a short line diff of two texts (- old, + new), for the changed-spec warning.
func lineDiff(old, new []byte) string {
	a, b := strings.Split(string(old), "\n"), strings.Split(string(new), "\n")
	// Longest common subsequence, fine for specs of a few hundred lines.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out bytes.Buffer
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "  +%d: %s\n", j+1, b[j])
			j++
		default:
			fmt.Fprintf(&out, "  -%d: %s\n", i+1, a[i])
			i++
		}
	}
	return out.String()
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
