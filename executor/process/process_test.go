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
	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
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

// gang builds a gang of n workers running a shell script.
func gang(id string, n int, script string) executor.Gang {
	node := cloud.Node{ID: "n1", GPUs: n, Addr: "127.0.0.1"}
	g := executor.Gang{Trial: id, Command: []string{"sh", "-c", script}}
	for r := range n {
		g.Workers = append(g.Workers, executor.Worker{Node: node, Env: trial.Env{TrialID: id, TargetIter: 2, Rank: r, WorldSize: n, GPUs: []int{r}}})
	}
	return g
}

func TestReportsCheckpointAndEnv(t *testing.T) {
	r := runtime(t)
	script := `echo "epoch log"; echo '@rb {"iter": 1, "acc": 0.5}'; echo '@rb broken'; ` +
		`echo '@rb {"iter": 2, "acc": 0.75}'; [ "$RANK" = 0 ] && echo "$WORLD_SIZE $MASTER_PORT" > "$RB_CHECKPOINT_DIR/state"; exit 0`
	h, err := r.Launch(context.Background(), gang("t1", 2, script))
	if err != nil {
		t.Fatal(err)
	}
	var iters []int
	for rep := range h.Reports() {
		iters = append(iters, rep.Iter)
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(iters) != 2 || iters[0] != 1 || iters[1] != 2 {
		t.Fatalf("reports %v (the malformed line must be skipped, not fatal)", iters)
	}
	log, _ := os.ReadFile(filepath.Join(r.LogDir, "t1.log"))
	if !strings.Contains(string(log), "epoch log") || !strings.Contains(string(log), "ignored a malformed report") {
		t.Fatalf("log:\n%s", log)
	}
	// The checkpoint went to the store: a fresh work dir gets it back on the next launch.
	os.RemoveAll(r.WorkDir)
	h, err = r.Launch(context.Background(), gang("t1", 1, `cat "$RB_CHECKPOINT_DIR/state"`))
	if err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	if err := h.Wait(); err != nil {
		t.Fatalf("the restored checkpoint is missing: %v", err)
	}
	log, _ = os.ReadFile(filepath.Join(r.LogDir, "t1.log"))
	if !strings.Contains(string(log), "2 ") {
		t.Fatalf("restored checkpoint not read:\n%s", log)
	}
}

// One worker dying stops the whole gang, and the failed run's output is not saved as a checkpoint.
func TestWorkerFailureStopsGang(t *testing.T) {
	r := runtime(t)
	script := `if [ "$RANK" = 1 ]; then sleep 0.2; exit 3; fi; echo x > "$RB_CHECKPOINT_DIR/state"; sleep 30`
	start := time.Now()
	h, err := r.Launch(context.Background(), gang("t2", 3, script))
	if err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	err = h.Wait()
	if err == nil || errors.Is(err, executor.ErrStopped) || time.Since(start) > 5*time.Second {
		t.Fatalf("wait: %v after %v", err, time.Since(start))
	}
	if list, _ := r.Store.List(context.Background(), "trials/t2/"); len(list) != 0 {
		t.Fatalf("a failed gang saved a checkpoint: %v", list)
	}
}

// Stop sends SIGTERM; a trainer that ignores it is killed after the grace period, and what it
// left is saved (a migration keeps the progress).
func TestStopThenKill(t *testing.T) {
	r := runtime(t)
	h, err := r.Launch(context.Background(), gang("t3", 1, `trap "" TERM; echo 5 > "$RB_CHECKPOINT_DIR/state"; sleep 30`))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	h.Stop()
	for range h.Reports() {
	}
	if err := h.Wait(); !errors.Is(err, executor.ErrStopped) {
		t.Fatalf("wait after stop: %v", err)
	}
	if el := time.Since(start); el < 400*time.Millisecond || el > 5*time.Second {
		t.Fatalf("stopped after %v; want about the 0.5 s grace period", el)
	}
	if list, _ := r.Store.List(context.Background(), "trials/t3/"); len(list) != 1 {
		t.Fatalf("stopped gang's checkpoint not saved: %v", list)
	}
}

// A gang that cannot start wholly starts not at all.
func TestLaunchAllOrNothing(t *testing.T) {
	r := runtime(t)
	if _, err := r.Launch(context.Background(), executor.Gang{Trial: "t4", Command: []string{"/no/such/trainer"},
		Workers: gang("t4", 2, "").Workers}); err == nil {
		t.Fatal("launch of a missing program succeeded")
	}
	if _, err := r.Launch(context.Background(), executor.Gang{Trial: "t5", Image: "trainer:1", Workers: gang("t5", 1, "").Workers}); err == nil {
		t.Fatal("the process runtime accepted an image")
	}
}

// Reap ends the gangs a dead driver left behind.
func TestReap(t *testing.T) {
	r := runtime(t)
	h, err := r.Launch(context.Background(), gang("t6", 2, "sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	pids, _ := os.ReadFile(filepath.Join(r.WorkDir, "t6", "pids"))
	if err := r.Reap(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	h.Wait()
	for _, p := range strings.Fields(string(pids)) {
		var pid int
		for _, c := range p {
			pid = pid*10 + int(c-'0')
		}
		if syscall.Kill(pid, 0) == nil {
			t.Fatalf("worker %d still alive after reap", pid)
		}
	}
}

// A result survives a driver that died between the checkpoint's save and its journal: the
// relaunch finds the checkpoint at the target and re-reports the kept report instead of training
// (here the trainer would fail if it ran again), from the same work dir and from a fresh one.
func TestRelaunchAtTargetReReports(t *testing.T) {
	r := runtime(t)
	marker := filepath.Join(t.TempDir(), "ran")
	script := `[ -e ` + marker + ` ] && exit 7; touch ` + marker + `; echo '@rb {"iter": 2, "acc": 0.75}'; echo 2 > "$RB_CHECKPOINT_DIR/state"`
	first := waitReports(t, r, gang("t7", 1, script))
	if len(first) != 1 || first[0].Iter != 2 {
		t.Fatalf("first launch reported %+v", first)
	}
	for _, fresh := range []bool{false, true} {
		if fresh {
			os.RemoveAll(r.WorkDir) // the relaunch restores from the store, report included
		}
		again := waitReports(t, r, gang("t7", 1, script))
		if len(again) != 1 || again[0].Iter != 2 || again[0].Metrics["acc"] != 0.75 || !again[0].At.Equal(first[0].At) {
			t.Fatalf("relaunch (fresh work dir: %v) reported %+v, want the kept %+v", fresh, again, first)
		}
	}
	if list, _ := r.Store.List(context.Background(), "trials/t7/"); len(list) != 1 {
		t.Fatalf("re-reporting saved a new checkpoint: %v", list)
	}
	// A later stage (a higher target) trains again.
	g := gang("t7", 1, `echo '@rb {"iter": 3, "acc": 0.8}'`)
	g.Workers[0].Env.StartIter, g.Workers[0].Env.TargetIter = 2, 3
	if reps := waitReports(t, r, g); len(reps) != 1 || reps[0].Iter != 3 {
		t.Fatalf("next stage reported %+v", reps)
	}
}

// A stopped gang keeps what it reached, report included, whatever its exit code: the relaunch
// continues from there.
func TestStoppedGangKeepsItsLastReport(t *testing.T) {
	r := runtime(t)
	h, err := r.Launch(context.Background(), gang("t8", 1, `echo '@rb {"iter": 1, "acc": 0.5}'; echo 1 > "$RB_CHECKPOINT_DIR/state"; sleep 30`))
	if err != nil {
		t.Fatal(err)
	}
	<-h.Reports()
	h.Stop()
	for range h.Reports() {
	}
	if err := h.Wait(); !errors.Is(err, executor.ErrStopped) {
		t.Fatalf("wait after stop: %v", err)
	}
	rep, ok, err := trial.LoadLastReport(filepath.Join(r.WorkDir, "t8", "checkpoint"))
	if err != nil || !ok || rep.Iter != 1 {
		t.Fatalf("kept report %+v, %v, %v", rep, ok, err)
	}
	// Short of the target (2): the relaunch trains.
	if reps := waitReports(t, r, gang("t8", 1, `echo '@rb {"iter": 2, "acc": 0.6}'`)); len(reps) != 1 || reps[0].Iter != 2 {
		t.Fatalf("relaunch reported %+v", reps)
	}
}

func waitReports(t *testing.T, r *Runtime, g executor.Gang) []trial.Report {
	t.Helper()
	h, err := r.Launch(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	var out []trial.Report
	for rep := range h.Reports() {
		out = append(out, rep)
	}
	if err := h.Wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
	return out
}
