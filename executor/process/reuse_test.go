package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/gang/gangtest"
	"github.com/rubberband-hpo/rubberband/trial"
	"github.com/rubberband-hpo/rubberband/trial/rbtrain"
)

// TestMain doubles as a reusable Go trainer (rbtrain.Serve) when reuseTrainerVar is set: it
// trains from its checkpoint to the target, reporting its process ID, and fails, hangs until
// SIGTERM or dies as the trial's parameters say.
func TestMain(m *testing.M) {
	if os.Getenv(reuseTrainerVar) == "1" {
		if err := rbtrain.Serve(reuseTrainer); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const reuseTrainerVar = "RB_PROCESS_TEST_TRAINER"

func reuseTrainer(r *rbtrain.Run) error {
	var p struct {
		Fail, Hang, Die bool
		Spawn           string // start a child in a session of its own that writes its PID there
	}
	if err := r.Params(&p); err != nil {
		return err
	}
	if p.Spawn != "" {
		if err := exec.Command("setsid", "sh", "-c", writePID(p.Spawn)+"; exec sleep 30").Start(); err != nil {
			return err
		}
	}
	start := 0
	if b, ok, _ := r.ReadCheckpoint("iter"); ok {
		start, _ = strconv.Atoi(string(b))
	}
	switch {
	case p.Fail:
		return errors.New("injected failure")
	case p.Die:
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case p.Hang:
		fmt.Fprintln(os.Stderr, "hanging")
		<-r.Terminated()
		return r.WriteCheckpoint("iter", []byte(strconv.Itoa(start)))
	}
	for it := start + 1; it <= r.TargetIter; it++ {
		r.Report(it, map[string]float64{"pid": float64(os.Getpid())})
	}
	return r.WriteCheckpoint("iter", []byte(strconv.Itoa(r.TargetIter)))
}

// reuseGang is a single-worker gang of the test binary as a reusable trainer on GPU gpu.
func reuseGang(id string, gpu, target int, params map[string]any) gang.Gang {
	return gang.Gang{Trial: id, Command: []string{os.Args[0]}, Env: map[string]string{reuseTrainerVar: "1"}, Reuse: true,
		Workers: []gang.Worker{{Node: cloud.Node{ID: "n1", GPUs: 4, Addr: "127.0.0.1"},
			Env: trial.Env{TrialID: id, TargetIter: target, WorldSize: 1, GPUs: []int{gpu}, Params: params}}}}
}

// runGang launches g and returns its reports and Wait's error, after the GPUs are free.
func runGang(t *testing.T, r *Runtime, g gang.Gang) ([]trial.Report, error) {
	t.Helper()
	h, err := r.Launch(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	var reps []trial.Report
	for rep := range h.Reports() {
		reps = append(reps, rep)
	}
	<-h.Exited()
	return reps, h.Wait()
}

func pidOf(t *testing.T, reps []trial.Report) int {
	t.Helper()
	if len(reps) == 0 {
		t.Fatal("no reports")
	}
	return int(reps[len(reps)-1].Metrics["pid"])
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// One process serves trial after trial on the same GPU, each from its own checkpoint; another
// GPU gets its own process; Close ends them.
func TestReuseServesTrialAfterTrial(t *testing.T) {
	r := runtime(t)
	first, err := runGang(t, r, reuseGang("t1", 0, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, first)
	for i, id := range []string{"t2", "t3", "t1"} {
		target := 3
		reps, err := runGang(t, r, reuseGang(id, 0, target, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := pidOf(t, reps); got != pid {
			t.Fatalf("launch %d (%s) ran in process %d, not the reused %d", i+2, id, got, pid)
		}
		want := []int{1, 2, 3}
		if id == "t1" {
			want = []int{3} // from its checkpoint at 2
		}
		if got := itersOf(reps); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s reported iterations %v, want %v", id, got, want)
		}
		if state, ok := savedIter(t, r, id); !ok || state != target {
			t.Fatalf("%s: checkpoint at %d (saved %v), want %d", id, state, ok, target)
		}
	}
	other, err := runGang(t, r, reuseGang("t4", 1, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	if pidOf(t, other) == pid {
		t.Fatal("GPU 1's trial ran in GPU 0's process")
	}
	log, _ := os.ReadFile(filepath.Join(r.LogDir, "t1.log"))
	if strings.Count(string(log), "@rb-end 0") != 2 {
		t.Fatalf("t1's log should hold both its runs' end lines:\n%s", log)
	}
	r.Close()
	for _, p := range []int{pid, pidOf(t, other)} {
		if alive(p) {
			t.Fatalf("process %d outlived Close", p)
		}
	}
}

// A trainer that ignores RB_REUSE serves one trial and exits: every launch still succeeds.
// This is also the whole Runtime contract with every gang asking for reuse.
func TestReuseOfTrainerThatExits(t *testing.T) {
	gangtest.Run(t, func(t *testing.T) gangtest.Env {
		r := runtime(t)
		t.Cleanup(func() { r.Close() })
		return gangtest.Env{Runtime: reusing{r}, Store: r.Store, Nodes: []cloud.Node{{ID: "local-0001", GPUs: 4, Addr: "127.0.0.1"}},
			LogDir: r.LogDir, Grace: r.Grace}
	})
}

type reusing struct{ *Runtime }

func (r reusing) Launch(ctx context.Context, g gang.Gang) (gang.Handle, error) {
	g.Reuse = true
	return r.Runtime.Launch(ctx, g)
}

// A run that fails, a process that dies and a stopped run each end their launch as an ordinary
// worker's would, and the process is not used again.
func TestReuseAfterFailureStopAndDeath(t *testing.T) {
	r := runtime(t)
	defer r.Close()
	reps, err := runGang(t, r, reuseGang("ok", 0, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, reps)

	if _, err := runGang(t, r, reuseGang("fails", 0, 1, map[string]any{"Fail": true})); err == nil || !strings.Contains(err.Error(), "code 1") {
		t.Fatalf("a failed run: Wait = %v", err)
	}
	if _, ok := savedIter(t, r, "fails"); ok {
		t.Fatal("a failed run's checkpoint was saved")
	}
	waitGone(t, pid)
	reps, err = runGang(t, r, reuseGang("after-fail", 0, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	pid = pidOf(t, reps)

	if _, err := runGang(t, r, reuseGang("dies", 0, 1, map[string]any{"Die": true})); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("a process that died: Wait = %v", err)
	}
	waitGone(t, pid)

	h, err := r.Launch(context.Background(), reuseGang("hangs", 0, 5, map[string]any{"Hang": true}))
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, "hangs", "hanging")
	h.Stop()
	for range h.Reports() {
	}
	if err := h.Wait(); !errors.Is(err, gang.ErrStopped) {
		t.Fatalf("a stopped run: Wait = %v", err)
	}
	if _, ok := savedIter(t, r, "hangs"); !ok {
		t.Fatal("a stopped run's checkpoint was not saved")
	}
	reps, err = runGang(t, r, reuseGang("after-stop", 0, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := pidOf(t, reps); got == pid {
		t.Fatal("a stopped process served the next trial")
	}
}

// Stopping a launch that has ended does not reach the process, which may serve the next trial
// by then.
func TestReuseStopAfterEndSparesTheNextTrial(t *testing.T) {
	r := runtime(t)
	defer r.Close()
	h, err := r.Launch(context.Background(), reuseGang("first", 0, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	for range h.Reports() {
	}
	h.Wait()
	next, err := r.Launch(context.Background(), reuseGang("next", 0, 5, map[string]any{"Hang": true}))
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, r, "next", "hanging")
	h.Stop() // the first launch's, long ended
	select {
	case <-next.Exited():
		t.Fatal("stopping an ended launch stopped the trial the process serves now")
	case <-time.After(300 * time.Millisecond):
	}
	next.Stop()
	next.Wait()
}

// An idle process ends after IdleTimeout.
func TestReuseIdleTimeout(t *testing.T) {
	r := runtime(t)
	r.IdleTimeout = 100 * time.Millisecond
	reps, err := runGang(t, r, reuseGang("t1", 0, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pidOf(t, reps))
	reps, err = runGang(t, r, reuseGang("t2", 0, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	waitGone(t, pidOf(t, reps))
}

func itersOf(reps []trial.Report) []int {
	var out []int
	for _, r := range reps {
		out = append(out, r.Iter)
	}
	return out
}

// savedIter is the iteration of the trial's checkpoint in the store.
func savedIter(t *testing.T, r *Runtime, id string) (int, bool) {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := checkpoint.RestoreDir(context.Background(), r.Store, id, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "iter"))
	if err != nil {
		return 0, false
	}
	n, _ := strconv.Atoi(string(b))
	return n, true
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
	}
}

func waitLog(t *testing.T, r *Runtime, id, text string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if log, _ := os.ReadFile(filepath.Join(r.LogDir, id+".log")); strings.Contains(string(log), text) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's log never said %q", id, text)
		}
	}
}
