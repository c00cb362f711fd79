package driver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// startOf is a Start of jobSpec on backend under a fresh root, planned now.
func startOf(t *testing.T, backend string) (Start, *bytes.Buffer) {
	t.Helper()
	tmp := t.TempDir()
	path := filepath.Join(tmp, "job.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(jobSpec, "SPEC", path)), 0o600); err != nil {
		t.Fatal(err)
	}
	exp, src, err := spec.LoadSource(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.For(exp)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	return Start{Spec: exp, Source: src, Sim: s, Root: filepath.Join(tmp, "root"), Backend: backend, TimeScale: 1,
		Exec: Exec{TrainerLogMB: 1, Options: Options{Log: &log}}}, &log
}

// StartRun makes a virtual run under the root, named for its spec, with the run ID its spec
// draws, and executes it to its end; the same folder is not taken twice, and resuming the
// finished run finds it finished.
func TestStartRunAndResume(t *testing.T) {
	s, log := startOf(t, Virtual)
	s.TimeScale = 0 // a simulated backend runs at 1 whatever it is given
	st, res, err := StartRun(context.Background(), s)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, log)
	}
	if !res.Finished || res.Best == nil {
		t.Fatalf("not finished: %+v", res)
	}
	if want, _ := filepath.Abs(filepath.Join(s.Root, s.Spec.Name)); st.Dir != want || st.Run.RunID != VirtualRunID(s.Spec, 0) || st.Run.TimeScale != 1 {
		t.Errorf("run: dir %s, ID %s, time scale %v", st.Dir, st.Run.RunID, st.Run.TimeScale)
	}
	s.Dir = st.Dir
	if _, _, err := StartRun(context.Background(), s); !errors.Is(err, rundir.ErrHasRun) {
		t.Errorf("a second run in %s: %v", st.Dir, err)
	}
	again, res, err := ResumeRun(context.Background(), Resume{State: st, Exec: s.Exec})
	if err != nil || !res.Finished || again.Dir != st.Dir {
		t.Errorf("resume: %+v, %v\n%s", res, err, log)
	}
}

// What StartRun refuses is input the user must change, said in the flags' words, before
// anything is planned or made.
func TestStartRunRefuses(t *testing.T) {
	seed := int64(3)
	for name, tc := range map[string]struct {
		change func(*Start)
		want   string
	}{
		"faults on a real backend": {func(s *Start) { s.Backend, s.Faults = Local, &seed }, "--faults needs --backend virtual"},
		"no time":                  {func(s *Start) { s.Backend, s.TimeScale = Local, 0 }, "--time-scale must be above 0"},
		"no plan file":             {func(s *Start) { s.PlanFile = filepath.Join(t.TempDir(), "none.json") }, "none.json"},
		"no trainer log":           {func(s *Start) { s.Exec.TrainerLogMB = 0 }, "--trainer-log-mb must be at least 1 (MiB), not 0"},
		"unknown backend":          {func(s *Start) { s.Backend = "mainframe" }, "mainframe"},
	} {
		s, _ := startOf(t, Virtual)
		tc.change(&s)
		_, _, err := StartRun(context.Background(), s)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInput saying %q", name, err, tc.want)
		}
	}
}
