package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/internal/syncio"
	"github.com/rubberband-hpo/rubberband/trial"
)

// ended says whether a process is over: no longer there, or a zombie (init may not reap here).
func ended(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// eventually polls cond every 10 ms until it holds, for within at most.
func eventually(within time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(within); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// pidIn reads the PID a script wrote to path (written whole: through a rename), waiting for it,
// and kills it when the test ends whatever happened.
func pidIn(t *testing.T, path string) int {
	t.Helper()
	var pid int
	if !eventually(5*time.Second, func() bool {
		b, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}) {
		t.Fatalf("no PID in %s", path)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// writePID is shell that writes the shell's PID to path whole.
func writePID(path string) string { return `echo $$ > ` + path + `.tmp; mv ` + path + `.tmp ` + path }

// finish drains h and waits for it, failing the test if the gang is not over within 5 s (the
// scripts' leaders exit at once: only what they left behind could hold it).
func finish(t *testing.T, h gang.Handle) ([]trial.Report, error) {
	t.Helper()
	type result struct {
		reps []trial.Report
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var reps []trial.Report
		for rep := range h.Reports() {
			reps = append(reps, rep)
		}
		done <- result{reps, h.Wait()}
	}()
	select {
	case r := <-done:
		return r.reps, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("the gang still runs 5 s after its leader exited")
		return nil, nil
	}
}

// A child that keeps the leader's stdout and stderr open does not hold the gang: it ends with
// the leader's own exit status and reports, and the child is ended with it; on the ordinary
// launch path and on a reused worker's.
func TestChildHoldingTheOutputDoesNotHoldTheGang(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reuse bool
		code  int
	}{{"exit 0", false, 0}, {"exit 3", false, 3}, {"reused, exit 0", true, 0}, {"reused, exit 3", true, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			r := runtime(t)
			defer r.Close()
			child := filepath.Join(t.TempDir(), "child")
			g := testGang("t-held", 1, `sh -c '`+writePID(child)+`; exec sleep 30' &
while [ ! -e `+child+` ]; do sleep 0.01; done; echo '@rb {"iter": 2}'; exit `+strconv.Itoa(tc.code))
			g.Reuse = tc.reuse
			h, err := r.Launch(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			pid := pidIn(t, child)
			reps, err := finish(t, h)
			if len(reps) != 1 || reps[0].Iter != 2 {
				t.Errorf("reports %+v, want the leader's one at iteration 2", reps)
			}
			if tc.code == 0 && err != nil {
				t.Errorf("Wait = %v, want nil: the leader exited 0", err)
			}
			if tc.code != 0 && (err == nil || !strings.Contains(err.Error(), "exit status 3")) {
				t.Errorf("Wait = %v, want the leader's exit status 3", err)
			}
			if !eventually(2*time.Second, func() bool { return ended(pid) }) {
				t.Errorf("the leader's child %d outlived its gang", pid)
			}
		})
	}
}

// A child started in a session of its own (setsid: outside the worker's process group), its
// output elsewhere, is ended with its gang; on the ordinary launch path and on a reused
// worker's (a trainer that ignores RB_REUSE: it exits after its trial).
func TestSetsidChildEndsWithItsGang(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("reuse=%v", reuse), func(t *testing.T) {
			r := runtime(t)
			child := filepath.Join(t.TempDir(), "child")
			g := testGang("t-setsid", 1, `setsid sh -c '`+writePID(child)+`; exec sleep 30' </dev/null >/dev/null 2>&1 &
while [ ! -e `+child+` ]; do sleep 0.01; done; echo '@rb {"iter": 2}'`)
			g.Reuse = reuse
			h, err := r.Launch(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			pid := pidIn(t, child)
			if _, err := finish(t, h); err != nil {
				t.Fatal(err)
			}
			r.Close()
			if !eventually(2*time.Second, func() bool { return ended(pid) }) {
				t.Fatalf("the setsid'd child %d outlived its gang", pid)
			}
			if log, _ := os.ReadFile(filepath.Join(r.LogDir, "t-setsid.log")); !reuse && !strings.Contains(string(log), "left behind") {
				t.Errorf("the trial's log does not say what was ended:\n%s", log)
			}
		})
	}
}

// A reused worker's child in a session of its own outlives the trial that started it while the
// worker serves (it may be the worker's, for the next trial too), and is ended with the worker:
// here by Close, which ends the idle worker.
func TestReusedWorkersChildEndsWithIt(t *testing.T) {
	r := runtime(t)
	child := filepath.Join(t.TempDir(), "child")
	reps, err := runGang(t, r, reuseGang("t-spawns", 0, 1, map[string]any{"Spawn": child}))
	if err != nil {
		t.Fatal(err)
	}
	pid := pidIn(t, child)
	if ended(pid) {
		t.Fatalf("the child %d was ended with the trial, while its worker %d goes on", pid, pidOf(t, reps))
	}
	r.Close()
	if !eventually(2*time.Second, func() bool { return ended(pid) }) {
		t.Fatalf("the reused worker's child %d outlived Close", pid)
	}
}

// Something the runtime cannot find (a child that cleared its environment and left the process
// group) and that holds the output open is cut off WaitDelay after the leader's exit: the gang
// ends with the leader's status, and the logs say the output was cut.
func TestUnreachableHolderCutOffAfterWaitDelay(t *testing.T) {
	r := runtime(t)
	var log bytes.Buffer
	r.Log = &syncio.Writer{W: &log}
	r.WaitDelay = 200 * time.Millisecond
	child := filepath.Join(t.TempDir(), "child")
	h, err := r.Launch(context.Background(), testGang("t-cut", 1, `env -i /usr/bin/setsid /bin/sh -c '`+writePID(child)+`; exec sleep 30' &
while [ ! -e `+child+` ]; do sleep 0.01; done; echo '@rb {"iter": 2}'`))
	if err != nil {
		t.Fatal(err)
	}
	pidIn(t, child)
	if reps, err := finish(t, h); err != nil || len(reps) != 1 {
		t.Fatalf("Wait = %v, reports %+v: want the leader's exit 0 and its report", err, reps)
	}
	trialLog, _ := os.ReadFile(filepath.Join(r.LogDir, "t-cut.log"))
	if !strings.Contains(string(trialLog), "held its output open") || !strings.Contains(log.String(), "held its output open") {
		t.Errorf("the cut output is not noted; trial log:\n%s\nruntime log:\n%s", trialLog, log.String())
	}
}

// With the driver a child subreaper, what a worker leaves behind is re-parented to the driver,
// and what the runtime ends it reaps: nothing is left a zombie.
func TestSubreaperAdoptsAndReaps(t *testing.T) {
	if err := BecomeSubreaper(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unsetSubreaper(t) })
	r := runtime(t)
	dir := t.TempDir()
	found, hidden := filepath.Join(dir, "found"), filepath.Join(dir, "hidden")
	// One child the runtime finds (its token), one it cannot (no environment, its own session).
	h, err := r.Launch(context.Background(), testGang("t-adopt", 1, `setsid sh -c '`+writePID(found)+`; exec sleep 30' </dev/null >/dev/null 2>&1 &
env -i /usr/bin/setsid /bin/sh -c '`+writePID(hidden)+`; exec sleep 30' </dev/null >/dev/null 2>&1 &
while [ ! -e `+found+` ] || [ ! -e `+hidden+` ]; do sleep 0.01; done`))
	if err != nil {
		t.Fatal(err)
	}
	foundPID, hiddenPID := pidIn(t, found), pidIn(t, hidden)
	if _, err := finish(t, h); err != nil {
		t.Fatal(err)
	}
	if !eventually(2*time.Second, func() bool { _, err := os.Stat(fmt.Sprintf("/proc/%d", foundPID)); return err != nil }) {
		t.Errorf("the ended child %d is still in /proc (a zombie nobody reaps?)", foundPID)
	}
	st, err := readStat(hiddenPID)
	if err != nil || st.ppid != os.Getpid() {
		t.Errorf("the orphan %d has parent %d (%v), want this process %d", hiddenPID, st.ppid, err, os.Getpid())
	}
	syscall.Kill(hiddenPID, syscall.SIGKILL)
	var ws syscall.WaitStatus
	syscall.Wait4(hiddenPID, &ws, 0, nil)
}

// Reap ends only processes that are still the ones a pids file recorded: not the process that
// has a recorded PID by now, nor one named by a file without identity, nor one from before the
// machine restarted. Each refusal is logged.
func TestReapChecksIdentity(t *testing.T) {
	planted := exec.Command("sleep", "30")
	planted.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group leader: a group kill would reach it
	if err := planted.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { planted.Process.Kill(); planted.Wait() })
	pid := planted.Process.Pid
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := bootID()
	if err != nil {
		t.Fatal(err)
	}
	record := func(boot string, start uint64) string {
		b, _ := json.Marshal(pidsFile{BootID: boot, Workers: []pidRecord{{PID: pid, Start: start}}})
		return string(b)
	}
	r := runtime(t)
	var log bytes.Buffer
	r.Log = &log
	for _, tc := range []struct{ name, file, logged string }{
		{"bare PIDs (the earlier format)", strconv.Itoa(pid) + "\n", "without their processes' identity"},
		{"another start time", record(boot, st.start+1), ""},
		{"another boot", record("another-boot", st.start), "before the machine restarted"},
		{"malformed", "{", "malformed"},
	} {
		log.Reset()
		f := filepath.Join(r.WorkDir, "t-planted", "pids")
		os.MkdirAll(filepath.Dir(f), 0o700)
		os.WriteFile(f, []byte(tc.file), 0o600)
		if err := r.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ended(pid) {
			t.Fatalf("%s: Reap killed the unrelated process %d", tc.name, pid)
		}
		if !strings.Contains(log.String(), tc.logged) {
			t.Errorf("%s: the runtime's log does not say %q:\n%s", tc.name, tc.logged, log.String())
		}
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s: the pids file is still there", tc.name)
		}
	}
	// The same process, recorded with its identity, is ended.
	f := filepath.Join(r.WorkDir, "t-planted", "pids")
	os.WriteFile(f, []byte(record(boot, st.start)), 0o600)
	if err := r.Reap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !ended(pid) {
		t.Fatalf("Reap left the recorded process %d running", pid)
	}
}
