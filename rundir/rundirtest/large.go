// Package rundirtest makes run folders for tests and benchmarks of what reads them: a large
// run's folder, its journal synthesized (journaltest), which no benchmark could run whole.
package rundirtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/executor/journal/journaltest"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Large makes the folder root/name of a run of a trials-trial Successive Halving job (eta 3, 1
// to maxIters iterations, journaltest.Job) on the virtual backend, as `run` makes it (run.json,
// the spec's copy, its plan), with the journal a driver would have written: a finished run, or
// with unfinished above 0 one whose driver is in stage unfinished (no lock is held: it died).
// It returns the folder.
func Large(root, name string, trials, maxIters, unfinished int) (string, error) {
	exp, text, shape, err := journaltest.Job(trials, maxIters)
	if err != nil {
		return "", err
	}
	shape.Unfinished = unfinished
	s, err := sim.For(exp)
	if err != nil {
		return "", fmt.Errorf("large run: %w", err)
	}
	res, err := s.Simulate(sim.Alloc{shape.Plan})
	if err != nil {
		return "", fmt.Errorf("large run: %w", err)
	}
	rep := planner.NewReport(exp, "greedy", exp.Deadline.Seconds(), true, res)
	dir := filepath.Join(root, name)
	if err := rundir.Mkdir(dir); err != nil {
		return "", fmt.Errorf("large run: %w", err)
	}
	rf := rundir.RunFile{RunID: "r20000101-000000-synth", Backend: "virtual", Spec: "large.yaml", TimeScale: 1,
		Samples: exp.Planner.Samples, Seed: exp.Seed}
	if err := rundir.Create(dir, rf, &spec.Source{Path: filepath.Join(dir, "large.yaml"), Data: text}, exp, rep); err != nil {
		return "", fmt.Errorf("large run: %w", err)
	}
	if _, err := journaltest.WriteSHA(filepath.Join(dir, rundir.Journal), shape); err != nil {
		return "", err
	}
	return dir, nil
}

// JournalLines are the records of the journal of the run in dir, each line with its newline,
// and the journal's path: what a test appends piece by piece to follow a run as it grows.
func JournalLines(dir string) (path string, lines [][]byte, err error) {
	path = filepath.Join(dir, rundir.Journal)
	whole, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("journal lines: %w", err)
	}
	return path, bytes.SplitAfter(whole, []byte("\n")), nil
}
