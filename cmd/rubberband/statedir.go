package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The state directory's layout and its reading are package rundir's; run and resume write it.
const (
	specCopy  = rundir.SpecCopy
	filesCopy = rundir.FilesCopy
)

// runFile is what a state directory remembers of how its run was started.
type runFile = rundir.RunFile

// state is a run's state directory, loaded.
type state struct {
	dir   string
	run   runFile
	exp   *spec.Experiment
	plan  *planner.Report
	alloc sim.Alloc
}

// shared is the state as package rundir reads it (exp as it is now: resume --spec may change it).
func (st *state) shared() *rundir.State {
	return &rundir.State{Dir: st.dir, Run: st.run, Exp: st.exp, Plan: st.plan, Alloc: st.alloc}
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
	for i, ref := range exp.ProfileFiles() { // the spec's profile and each instance type's
		src := ref
		if !filepath.IsAbs(src) {
			src = filepath.Join(filepath.Dir(path), ref)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("copy the spec's profile: %w", err)
		}
		name := fmt.Sprintf("%d-%s", i, filepath.Base(ref))
		if err := os.MkdirAll(filepath.Join(dir, filesCopy), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, filesCopy, name), b); err != nil {
			return err
		}
		if rf.Files == nil {
			rf.Files = map[string]string{}
		}
		rf.Files[ref] = name
	}
	return nil
}

// loadSpecCopy loads the run's spec from the state directory's copy.
func loadSpecCopy(dir string, rf runFile) (*spec.Experiment, []byte, error) {
	return rundir.LoadSpecCopy(dir, rf)
}

func openState(dir string) (*state, error) {
	rs, err := rundir.Open(dir)
	if errors.Is(err, rundir.ErrNotRun) || errors.Is(err, rundir.ErrSpec) {
		return nil, usageErr("%v", err)
	}
	if err != nil {
		return nil, err
	}
	return &state{dir: rs.Dir, run: rs.Run, exp: rs.Exp, plan: rs.Plan, alloc: rs.Alloc}, nil
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
