package process

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/gang/gangtest"
	"github.com/rubberband-hpo/rubberband/trial"
)

func runtime(t *testing.T) *Runtime {
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	return &Runtime{Store: store, WorkDir: filepath.Join(dir, "work"), LogDir: filepath.Join(dir, "logs"), Grace: 500 * time.Millisecond}
}

// The Runtime contract: one node, every worker a process on this machine.
func TestContract(t *testing.T) {
	gangtest.Run(t, func(t *testing.T) gangtest.Env {
		r := runtime(t)
		return gangtest.Env{Runtime: r, Store: r.Store, Nodes: []cloud.Node{{ID: "local-0001", GPUs: 4, Addr: "127.0.0.1"}, {ID: "local-0002", GPUs: 4, Addr: "127.0.0.1"}},
			LogDir: r.LogDir, Grace: r.Grace, Interrupt: r.InterruptNode}
	})
}

// testGang builds a gang of n workers running a shell script.
func testGang(id string, n int, script string) gang.Gang {
	node := cloud.Node{ID: "n1", GPUs: n, Addr: "127.0.0.1"}
	g := gang.Gang{Trial: id, Command: []string{"sh", "-c", script}}
	for r := range n {
		g.Workers = append(g.Workers, gang.Worker{Node: node, Env: trial.Env{TrialID: id, TargetIter: 2, Rank: r, WorldSize: n, GPUs: []int{r}}})
	}
	return g
}

// A malformed report is noted in the trial's log, beside the trainer's own output.
func TestMalformedReportNoted(t *testing.T) {
	r := runtime(t)
	waitReports(t, r, testGang("t1", 1, `echo "epoch log"; echo '@rb broken'; echo '@rb {"iter": 2}'`))
	log, _ := os.ReadFile(filepath.Join(r.LogDir, "t1.log"))
	if !strings.Contains(string(log), "epoch log") || !strings.Contains(string(log), "ignored a malformed report") {
		t.Fatalf("log:\n%s", log)
	}
}

// Images need a container runtime.
func TestRefusesImages(t *testing.T) {
	r := runtime(t)
	if _, err := r.Launch(context.Background(), gang.Gang{Trial: "t5", Image: "trainer:1", Workers: testGang("t5", 1, "").Workers}); err == nil {
		t.Fatal("the process runtime accepted an image")
	}
}

// Reap ends the gangs a dead driver left behind.
func TestReap(t *testing.T) {
	r := runtime(t)
	h, err := r.Launch(context.Background(), testGang("t6", 2, "sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(r.WorkDir, "t6", "pids")
	if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("pids file: %v, mode %v: want 0600, its owner's only", err, info.Mode().Perm())
	}
	rec, err := readPIDs(f)
	if err != nil || len(rec.Workers) != 2 {
		t.Fatalf("pids file: %+v, %v", rec, err)
	}
	if err := r.Reap(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	h.Wait()
	for _, w := range rec.Workers {
		if syscall.Kill(w.PID, 0) == nil {
			t.Fatalf("worker %d still alive after reap", w.PID)
		}
	}
}

// A relaunch on another machine (a fresh work dir) restores from the store, the kept report
// included: it re-reports at the target, and a later stage continues from the checkpoint.
func TestFreshWorkDirRestoresFromStore(t *testing.T) {
	r := runtime(t)
	marker := filepath.Join(t.TempDir(), "ran")
	script := `[ -e ` + marker + ` ] && exit 7; touch ` + marker + `; echo '@rb {"iter": 2, "acc": 0.75}'; echo 2 > "$RB_CHECKPOINT_DIR/state"`
	first := waitReports(t, r, testGang("t7", 1, script))
	os.RemoveAll(r.WorkDir)
	again := waitReports(t, r, testGang("t7", 1, script))
	if len(again) != 1 || again[0].Iter != 2 || !again[0].At.Equal(first[0].At) {
		t.Fatalf("relaunch from a fresh work dir reported %+v, want the kept %+v", again, first)
	}
	os.RemoveAll(r.WorkDir)
	g := testGang("t7", 1, `echo "@rb {\"iter\": 3, \"state\": $(cat "$RB_CHECKPOINT_DIR/state")}"`)
	g.Workers[0].Env.StartIter, g.Workers[0].Env.TargetIter = 2, 3
	if reps := waitReports(t, r, g); len(reps) != 1 || reps[0].Iter != 3 || reps[0].Metrics["state"] != 2 {
		t.Fatalf("next stage reported %+v", reps)
	}
}

func waitReports(t *testing.T, r *Runtime, g gang.Gang) []trial.Report {
	t.Helper()
	reps, err := runGang(t, r, g)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return reps
}

// The built-in trainers run from their own small binary when the runtime has one:
// [rubberband, trainer, NAME, ARGS...] becomes [Trainer, NAME, ARGS...]; other commands naming
// rubberband run the driver's binary.
func TestBuiltInTrainersRunFromTheirOwnBinary(t *testing.T) {
	r := runtime(t)
	dir := t.TempDir()
	r.Trainer = filepath.Join(dir, "trainer.sh")
	os.WriteFile(r.Trainer, []byte("#!/bin/sh\necho \"small binary: $*\"\n"), 0o755)
	g := testGang("t9", 1, "")
	g.Command = []string{"rubberband", "trainer", "synthetic", "--spec", "x.yaml"}
	h, err := r.Launch(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	h.Wait()
	log, _ := os.ReadFile(filepath.Join(r.LogDir, "t9.log"))
	if !strings.Contains(string(log), "small binary: synthetic --spec x.yaml") {
		t.Fatalf("log:\n%s", log)
	}
}

// InterruptNode stops the gangs on the node as Stop does, their checkpoint saved, and Wait names
// the node; gangs elsewhere go on; a later launch on the node is refused as unplaceable, an
// interruption of the node.
func TestInterruptNode(t *testing.T) {
	r := runtime(t)
	script := `trap 'echo "@rb {\"iter\": 1}"; mkdir -p "$RB_CHECKPOINT_DIR"; echo 1 > "$RB_CHECKPOINT_DIR/state"; exit 0' TERM; while true; do sleep 0.05; done`
	hit := testGang("t-hit", 1, script)
	other := testGang("t-other", 1, script)
	other.Workers[0].Node.ID = "n2"
	h, err := r.Launch(t.Context(), hit)
	if err != nil {
		t.Fatal(err)
	}
	o, err := r.Launch(t.Context(), other)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	r.InterruptNode("n1", "spot interruption notice (test)")
	for range h.Reports() {
	}
	var ie *gang.InterruptedError
	if err := h.Wait(); !errors.As(err, &ie) || ie.Node != "n1" || ie.Reason != "spot interruption notice (test)" {
		t.Fatalf("wait: %v, want the interruption of n1", err)
	}
	if list, _ := r.Store.List(t.Context(), "trials/t-hit/"); len(list) != 1 {
		t.Fatalf("checkpoints of the interrupted gang: %v", list)
	}
	select {
	case <-o.Exited():
		t.Fatal("a gang on another node was stopped")
	default:
	}
	o.Stop()
	o.Wait()
	// The node's loss, not the gang's failure: the driver replaces the node and does not count
	// the try (a node interrupted while idle is learnt of so).
	_, err = r.Launch(t.Context(), testGang("t-next", 1, "true"))
	if !errors.Is(err, gang.ErrUnplaceable) || !errors.As(err, &ie) || ie.Node != "n1" || ie.Reason != "spot interruption notice (test)" {
		t.Fatalf("a launch on the interrupted node: %v", err)
	}
}

// A gang with a worker on an emulated slow node tells every worker its slowdown (a data-parallel
// gang runs at its slowest node's pace); a gang on fast nodes tells none.
func TestSlowNodeSlowsTheWholeGang(t *testing.T) {
	r := runtime(t)
	for _, tc := range []struct {
		trial string
		slow  float64
		want  string
	}{{"t-fast", 0, "slowdown=none"}, {"t-slow", 2.5, "slowdown=2.5"}} {
		g := testGang(tc.trial, 2, `echo "slowdown=${`+trial.NodeSlowdownVar+`:-none}" >&2; echo '@rb {"iter": 2}'`)
		g.Workers[1].Node.ID, g.Workers[1].Node.Slowdown = "n2", tc.slow
		waitReports(t, r, g)
		log, _ := os.ReadFile(filepath.Join(r.LogDir, g.Trial+".log"))
		if got := strings.Count(string(log), tc.want+"\n"); got != 2 {
			t.Fatalf("node slowdown %v: %d of 2 workers were told %q:\n%s", tc.slow, got, tc.want, log)
		}
	}
}
