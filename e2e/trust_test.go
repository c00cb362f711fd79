package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// The run path as an adversary tries it: two drivers, a damaged journal, hostile output, a run
// that fails, a trainer that hangs, an edited or vanished spec, a cancel. Each test reproduces a
// failure the run path once had.

// trialSpec writes a synthetic job into dir: spec.yaml, whose trainer reads its profile from a
// copy of its own (trainer.yaml), so that editing or deleting spec.yaml leaves the trainer alone.
// edit changes spec.yaml's text.
func trialSpec(t testing.TB, dir string, edit func(string) string) string {
	t.Helper()
	trainer, _ := syntheticSpec(t, dir, "trainer.yaml")
	src, err := os.ReadFile(trainer)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	if edit != nil {
		text = edit(text)
	}
	file := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// startRun starts the CLI in the background.
func startRun(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

// waitFor polls the journal until cond holds.
func waitFor(t testing.TB, state string, what string, cond func(journal string) bool) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(state, rundir.Journal))
		if cond(string(b)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// processesWith counts live processes whose command line mentions s.
func processesWith(s string) int { return len(pidsWith(s)) }

// killProcessesWith kills every live process whose command line holds s.
func killProcessesWith(s string) {
	for _, pid := range pidsWith(s) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// pidsWith lists the live processes (zombies aside) other than this one whose command line holds s.
func pidsWith(s string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(filepath.Dir(f), "stat")); err == nil && !bytes.Contains(st, []byte(") Z ")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func heldNodes(t testing.TB, state string) int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(state, rundir.NodesFile))
	return strings.Count(string(b), `"id"`)
}

// 1. One driver per state directory: a second run or resume is refused with the holder's PID;
// the lock of a driver that died is taken over.
func TestSecondDriverIsRefused(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, nil)
	state := filepath.Join(tmp, "state")
	first := startRun(t, nil, "run", spec, "--state", state, "--time-scale", "0.05")
	waitFor(t, state, "the first stage", func(j string) bool { return strings.Contains(j, `"ev":"launch"`) })
	pid := strconv.Itoa(first.Process.Pid)
	for _, args := range [][]string{{"resume", state}, {"run", spec, "--state", state}} {
		_, errOut, code := rb(t, args...)
		if code != 2 || !strings.Contains(errOut, "in use by PID "+pid) || !strings.Contains(errOut, "rubberband cancel") {
			t.Fatalf("%s while a driver runs: exit %d: %s", args[0], code, errOut)
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	out, errOut, code := rb(t, "resume", state, "-o", "json")
	if !finishedCode(code) || !strings.Contains(errOut, "took over the lock of PID "+pid) {
		t.Fatalf("resume after the driver died: exit %d: %s\n%s", code, errOut, out)
	}
	events := readJournal(t, state) // every line whole and valid
	if rep := readRunReport(t, state); !rep.Finished || rep.Best == nil || count(events, journal.EvFinish) != 1 {
		t.Fatalf("report %+v", rep)
	}
}

func count(events []journal.Event, ev journal.Kind) int {
	n := 0
	for _, e := range events {
		if e.Ev == ev {
			n++
		}
	}
	return n
}

// 2. A damaged record in the middle of the journal is an error that names it, never a silent
// truncation; --repair-journal keeps what came before and the run ends with the same winner.
func TestDamagedJournalIsAnError(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, nil)
	state := filepath.Join(tmp, "state")
	if _, errOut, code := rb(t, "run", spec, "--state", state, "--time-scale", "0.02"); code != 0 {
		t.Fatalf("run: %s", errOut)
	}
	want := readRunReport(t, state)
	path := filepath.Join(state, rundir.Journal)
	whole, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	// Flip a byte inside line 40's metrics: still JSON, only the checksum tells.
	start := len(bytes.Join(lines[:39], nil))
	damaged := bytes.Clone(whole)
	at := start + bytes.LastIndexByte(lines[39], '}') - 2
	damaged[at] ^= 0x01
	os.WriteFile(path, damaged, 0o644)
	for _, cmd := range []string{"resume", "status"} {
		_, errOut, code := rb(t, cmd, state)
		if code == 0 || !strings.Contains(errOut, "line 40") || !strings.Contains(errOut, "--repair-journal") {
			t.Fatalf("%s of a damaged journal: exit %d: %s", cmd, code, errOut)
		}
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, damaged) {
		t.Fatal("the damaged journal was changed")
	}
	// The resumed run's clock counts the wall time since the run began, 50 spec seconds a second
	// at this time scale: on a loaded machine it ends past the deadline (exit 5, its result
	// standing), which is not what this test is about.
	_, errOut, code := rb(t, "resume", state, "--repair-journal")
	if (code != 0 && code != driver.ExitDeadlineMissed) || !strings.Contains(errOut, "first 39 records") {
		t.Fatalf("resume --repair-journal: exit %d: %s", code, errOut)
	}
	if got := readRunReport(t, state); got.Best == nil || got.Best.Trial != want.Best.Trial || got.Best.Metric != want.Best.Metric {
		t.Fatalf("repaired run's best %+v, the run's own %+v", got.Best, want.Best)
	}
	if backups, _ := filepath.Glob(path + ".damaged-*"); len(backups) != 1 {
		t.Fatalf("backups of the damaged journal: %v", backups)
	}
}

// 4. A line of several MiB on a trainer's stdout is logged intact and reports after it are still
// read.
func TestHugeOutputLineIsLoggedAndReportsGoOn(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, func(s string) string { return strings.Replace(s, "trials: 16", "trials: 4", 1) })
	state := filepath.Join(tmp, "state")
	cmd := exec.Command(binary, "run", spec, "--state", state, "--time-scale", "0.02", "-o", "json")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "RB_SYNTH_NOISE=3000000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%.2000s", err, out)
	}
	rep := readRunReport(t, state)
	if !rep.Finished || rep.Best == nil {
		t.Fatalf("report %+v", rep)
	}
	for _, e := range readJournal(t, state) {
		if e.Ev == journal.EvDone && e.Metric == nil {
			t.Fatalf("trial %s stage %d: no metric: reports after the long line were lost", e.Trial, e.Stage)
		}
	}
	log, _ := os.ReadFile(filepath.Join(state, "logs", rep.Best.Trial+".log"))
	if !bytes.Contains(log, bytes.Repeat([]byte("x"), 3000000)) {
		t.Fatalf("the 3 MB line is not in the log intact (log of %d bytes)", len(log))
	}
}

// 5. A run that fails releases its nodes at once (the meter stops), and says so.
func TestFailedRunReleasesItsNodes(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, func(s string) string {
		return strings.Replace(s, "trainer: {command: [rubberband, trainer, synthetic", "trainer: {command: [sh, -c, 'printf \"\\033[2Jno module named torch\\n\" >&2; exit 3', synthetic", 1)
	})
	state := filepath.Join(tmp, "state")
	_, errOut, code := rb(t, "run", spec, "--state", state, "--time-scale", "0.02")
	if code != 1 || !strings.Contains(errOut, "all failed the same way") || !strings.Contains(errOut, "rubberband logs ") || !strings.Contains(errOut, "nodes are released") {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	// The first trial's last words are shown with the error, without the terminal escape (clear
	// the screen) it printed, whole (not its escape byte alone, in the try's error either): no
	// second command to find them.
	if strings.Contains(errOut, "\x1b") || strings.Contains(errOut, "[2J") || !regexp.MustCompile(`the last lines of trial b0-t\d+'s log:\n(  \| .*\n)*  \| no module named torch\n`).MatchString(errOut) {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	if n := heldNodes(t, state); n != 0 {
		t.Fatalf("%d nodes still held after the run failed", n)
	}
	cost := func() float64 {
		out, _, _ := rb(t, "status", state, "-o", "json")
		var r runstate.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.Realized.Cost
	}
	before := cost()
	time.Sleep(1500 * time.Millisecond)
	if after := cost(); after != before || before <= 0 {
		t.Fatalf("the cost of a failed run goes on rising: %v then %v", before, after)
	}
}

// 6. A trainer that hangs is stopped after its budget and retried from its checkpoint; a driver
// that dies leaves no trainer running.
func TestHangingTrainerTimesOut(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, func(s string) string {
		return strings.Replace(s, "trainer: {command: [rubberband", "trainer: {timeout: 40s, command: [rubberband", 1)
	})
	state := filepath.Join(tmp, "state")
	// At a tenth of real time the budget of 40 s is 4 s: room for the retry on a loaded machine.
	cmd := exec.Command(binary, "run", spec, "--state", state, "--time-scale", "0.1", "-o", "json")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "RB_SYNTH_HANG=b0-t0002@1", "RB_SYNTH_CRASH_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	events := readJournal(t, state)
	var timeouts, fails, done int
	for _, e := range events {
		if e.Trial != "b0-t0002" || e.Stage != 0 {
			continue
		}
		switch e.Ev {
		case journal.EvTimeout:
			timeouts++
		case journal.EvFail:
			fails++
			if !strings.Contains(e.Error, "timed out") {
				t.Errorf("fail event %q", e.Error)
			}
		case journal.EvDone:
			done++
		}
	}
	if timeouts != 1 || fails != 1 || done != 1 || !strings.Contains(string(out), "budget") {
		t.Fatalf("b0-t0002: %d timeouts, %d fails, %d done; output:\n%s", timeouts, fails, done, out)
	}
}

// 6b. Trainers do not outlive a driver killed with SIGKILL.
func TestNoTrainerOutlivesItsDriver(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, nil)
	state := filepath.Join(tmp, "state")
	driver := startRun(t, nil, "run", spec, "--state", state, "--time-scale", "0.2")
	// Wait for live trainers themselves, not for launch events: a trainer launched may already
	// have ended by the time the journal is read (CI once found none after 4 launches).
	trainer := filepath.Join(tmp, "trainer.yaml") // on every trainer's command line
	for deadline := time.Now().Add(90 * time.Second); processesWith(trainer) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no trainer process seen while the run went on")
		}
	}
	driver.Process.Signal(syscall.SIGKILL)
	driver.Wait()
	for deadline := time.Now().Add(5 * time.Second); processesWith(trainer) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d trainer processes outlived their driver", processesWith(trainer))
		}
	}
}

// 7. The state directory holds its own spec: an edited original only warns (with the diff) and
// the run goes on with its copy; a vanished original does not matter; resume --spec changes the
// run's spec, journaled.
func TestStateDirIsSelfContained(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, nil)
	whole := filepath.Join(tmp, "whole")
	if _, errOut, code := rb(t, "run", spec, "--state", whole, "--time-scale", "0.02"); code != 0 {
		t.Fatalf("run: %s", errOut)
	}
	state := filepath.Join(tmp, "state")
	driver := startRun(t, nil, "run", spec, "--state", state, "--time-scale", "0.02")
	waitFor(t, state, "the first sync", func(j string) bool { return strings.Contains(j, `"ev":"sync"`) })
	driver.Process.Signal(syscall.SIGKILL)
	driver.Wait()
	src, _ := os.ReadFile(spec)
	os.WriteFile(spec, bytes.Replace(src, []byte("mode: max"), []byte("mode: min"), 1), 0o644)
	_, errOut, code := rb(t, "resume", state)
	if !finishedCode(code) || !strings.Contains(errOut, "changed since the run started") || !strings.Contains(errOut, "mode: min") {
		t.Fatalf("resume after the spec was edited: exit %d: %s", code, errOut)
	}
	got, want := readRunReport(t, state), readRunReport(t, whole)
	if got.Best == nil || got.Best.Trial != want.Best.Trial {
		t.Fatalf("best %+v; the run as started picks %+v", got.Best, want.Best)
	}
	os.Remove(spec)
	for _, args := range [][]string{{"status", state}, {"report", state}} {
		if out, errOut, code := rb(t, args...); code != 0 || !strings.Contains(out, want.Best.Trial) {
			t.Fatalf("%s without the original spec: exit %d: %s\n%s", args[0], code, errOut, out)
		}
	}
	// resume --spec: a new spec for a run, journaled (here on a run that had finished: a no-op run).
	next := filepath.Join(tmp, "next.yaml")
	os.WriteFile(next, bytes.Replace(src, []byte("price_per_hour: 12"), []byte("price_per_hour: 13"), 1), 0o644)
	if _, errOut, code := rb(t, "resume", state, "--spec", next); !finishedCode(code) || !strings.Contains(errOut, "price_per_hour: 13") {
		t.Fatalf("resume --spec: exit %d: %s", code, errOut)
	}
	if count(readJournal(t, state), journal.EvSpec) != 1 {
		t.Fatal("the spec change is not journaled")
	}
	bad := filepath.Join(tmp, "bad.yaml")
	os.WriteFile(bad, bytes.Replace(src, []byte("trials: 16"), []byte("trials: 8"), 1), 0o644)
	if _, errOut, code := rb(t, "resume", state, "--spec", bad); code != 2 || !strings.Contains(errOut, "other stages") {
		t.Fatalf("resume --spec with other stages: exit %d: %s", code, errOut)
	}
}

// The run keeps the spec it planned: the bytes it read once are parsed, planned and snapshotted,
// so an edit of the file while the plan is being made changes nothing. Before, the spec was read
// again for the snapshot: an edit made while planning was saved beside a plan made for the old
// spec, the run died, and status could not read what it left.
func TestRunKeepsTheSpecItPlanned(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, nil)
	src, _ := os.ReadFile(spec)
	state := filepath.Join(tmp, "state")
	// 50,000 samples: planning takes seconds, and says so after the first; the run itself is
	// in virtual time, since what it runs is not the point.
	cmd := exec.Command(binary, "run", spec, "--state", state, "--backend", "virtual", "--samples", "50000", "--planner", "optimal", "--no-replan")
	cmd.Dir = ".."
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := bufio.NewScanner(stderr)
	var said strings.Builder
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "planning:") {
		said.WriteString(lines.Text() + "\n")
	}
	if _, err := os.Stat(filepath.Join(state, rundir.RunJSON)); err == nil {
		t.Fatalf("the run was made before its plan:\n%s", said.String())
	}
	// Other stages: no plan for the old spec fits the new one.
	os.WriteFile(spec, bytes.Replace(src, []byte("trials: 16"), []byte("trials: 8"), 1), 0o644)
	rest, _ := io.ReadAll(stderr)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s%s", err, said.String(), rest)
	}
	if copied, _ := os.ReadFile(filepath.Join(state, rundir.SpecCopy)); !bytes.Equal(copied, src) {
		t.Errorf("the run's copy of its spec is not the spec it planned:\n%s", copied)
	}
	var rf rundir.RunFile
	b, _ := os.ReadFile(filepath.Join(state, rundir.RunJSON))
	json.Unmarshal(b, &rf)
	if sum := sha256.Sum256(src); rf.SpecSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("run.json's spec_sha256 %s is not the planned spec's", rf.SpecSHA256)
	}
	if out, errOut, code := rb(t, "status", state); code != 0 || !strings.Contains(out, "finished") {
		t.Fatalf("status: exit %d: %s\n%s", code, errOut, out)
	}
}

// What a run writes is its owner's alone: other users could read spec.yaml (which may hold
// trainer.env secrets), the plan, the logs and the checkpoints. Every state file is 0600 and
// every directory the driver makes 0700, the umask aside.
func TestStateIsPrivate(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, nil)
	state := filepath.Join(tmp, "state")
	if _, errOut, code := rb(t, "run", spec, "--state", state, "--time-scale", "0.02", "--no-replan"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	want := map[string]os.FileMode{".": 0o700, rundir.LogsDir: 0o700, rundir.WorkDir: 0o700, rundir.CheckpointsDir: 0o700,
		rundir.RunJSON: 0o600, rundir.PlanFile: 0o600, rundir.SpecCopy: 0o600, rundir.ReportFile: 0o600, rundir.DriverLog: 0o600}
	for name, mode := range want {
		info, err := os.Stat(filepath.Join(state, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := info.Mode().Perm(); got != mode {
			t.Errorf("%s is %#o, want %#o", name, got, mode)
		}
	}
	// Every file the driver writes is its owner's alone: the journal, the lock, the local
	// provider's nodes, the trainers' logs (under checkpoints/ and work/ the trainer writes, in
	// directories of 0o700).
	filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(state, path)
		if err != nil || rel == rundir.CheckpointsDir || rel == rundir.WorkDir {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %#o: others may read it", rel, info.Mode().Perm())
		}
		return nil
	})
	// No temporary file of an atomic write is left behind.
	entries, _ := os.ReadDir(state)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// cancel: the driver stops, the nodes go, the run is marked cancelled and resume refuses it
// without --force.
func TestCancel(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, nil)
	state := filepath.Join(tmp, "state")
	driver := startRun(t, nil, "run", spec, "--state", state, "--time-scale", "0.1")
	waitFor(t, state, "running gangs", func(j string) bool { return strings.Count(j, `"ev":"launch"`) >= 4 })
	out, errOut, code := rb(t, "cancel", state)
	if code != 0 || !strings.Contains(out, "is cancelled") {
		t.Fatalf("cancel: exit %d: %s\n%s", code, errOut, out)
	}
	driver.Wait()
	if driver.ProcessState.ExitCode() != 1 {
		t.Fatalf("the cancelled driver exited %d", driver.ProcessState.ExitCode())
	}
	if n := heldNodes(t, state); n != 0 || count(readJournal(t, state), journal.EvCancel) != 1 {
		t.Fatalf("%d nodes held; journal cancel events %d", n, count(readJournal(t, state), journal.EvCancel))
	}
	if processesWith(filepath.Join(tmp, "trainer.yaml")) != 0 {
		t.Fatal("trainers still running after cancel")
	}
	if out, _, _ := rb(t, "status", state); !strings.Contains(out, "cancelled") {
		t.Fatalf("status of a cancelled run:\n%s", out)
	}
	if _, errOut, code := rb(t, "resume", state); code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("resume of a cancelled run: exit %d: %s", code, errOut)
	}
	if _, errOut, code := rb(t, "resume", state, "--force"); !finishedCode(code) {
		t.Fatalf("resume --force: exit %d: %s", code, errOut)
	}
	// A stale cancel: no driver; cancel releases what the journal knows itself.
	state2 := filepath.Join(tmp, "state2")
	driver = startRun(t, nil, "run", spec, "--state", state2, "--time-scale", "0.1")
	waitFor(t, state2, "nodes", func(j string) bool { return strings.Contains(j, `"ev":"launch"`) })
	driver.Process.Signal(syscall.SIGKILL)
	driver.Wait()
	if heldNodes(t, state2) == 0 {
		t.Fatal("the killed driver's nodes vanished by themselves")
	}
	if out, errOut, code := rb(t, "cancel", state2); code != 0 || !strings.Contains(out, "is cancelled") {
		t.Fatalf("cancel of a dead driver's run: exit %d: %s\n%s", code, errOut, out)
	}
	if n := heldNodes(t, state2); n != 0 {
		t.Fatalf("%d nodes held after cancel", n)
	}
}

// The crash campaign: the driver is killed with SIGKILL again and again — just after it starts
// (during resume itself), while nodes come up, mid-stage, at a sync — and resumed each time.
// The run ends with the clean run's winner and survivors, no trial-stage done twice, no trainer
// left running, and a realized cost that includes the time the dead drivers held nodes.
//
// make test kills real drivers once at each of the four moments; the thousands of seeded fault
// schedules are TestFaultCampaign's, in virtual time (executor/virtual), and `make soak` runs
// this one with two dozen kills.
func TestCrashCampaign(t *testing.T) {
	t.Parallel()
	crashCampaign(t, 4, "0.1")
}

// BenchmarkSoakDriverKills is the crash campaign at two dozen real kills (make soak).
func BenchmarkSoakDriverKills(b *testing.B) { crashCampaign(b, 24, "0.3") }

func crashCampaign(t testing.TB, campaign int, timeScale string) {
	tmp := t.TempDir()
	// With reused trainer processes (every gang here is one worker): a process that serves trial
	// after trial must die with its driver as a per-launch one does, and change no result.
	spec := trialSpec(t, tmp, func(s string) string {
		return strings.Replace(strings.Replace(s, "trials: 16", "trials: 32", 1), "trainer: {command", "trainer: {reuse: true, command", 1)
	})
	plan := planFile(t, tmp, spec, "16,16,8,4") // 4 nodes, then 2, then 1: scale-downs at the syncs
	whole := filepath.Join(tmp, "whole")
	// At 0.3 of real time the job lasts long enough (half a minute of work) for two dozen kills.
	if _, errOut, code := rb(t, "run", spec, "--plan", plan, "--state", whole, "--time-scale", timeScale); code != 0 {
		t.Fatalf("clean run: %s", errOut)
	}
	clean := readJournal(t, whole)
	state := filepath.Join(tmp, "state")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := map[string]int{}
	args := []string{"run", spec, "--plan", plan, "--state", state, "--time-scale", timeScale}
	for i := 0; ; i++ {
		before, _ := os.ReadFile(filepath.Join(state, rundir.Journal))
		total := 0
		for _, n := range kills {
			total += n
		}
		if _, err := os.Stat(filepath.Join(state, rundir.RunJSON)); err == nil {
			args = []string{"resume", state} // else killed while planning: `run` again
		}
		driver := startRun(t, nil, args...)
		moment := []string{"starting", "scale-up", "mid-stage", "sync"}[i%4]
		trigger := func(j string) bool {
			news := j[min(len(before), len(j)):]
			switch moment {
			case "scale-up":
				return strings.Contains(news, `"ev":"node_up"`)
			case "mid-stage":
				return strings.Count(news, `"ev":"done"`) >= 1+r.IntN(3)
			case "sync":
				return strings.Contains(news, `"ev":"sync"`)
			}
			return true
		}
		if total >= campaign {
			trigger = func(string) bool { return false } // enough: let this one finish
		}
		if moment == "starting" && total < campaign {
			time.Sleep(time.Duration(r.IntN(150)) * time.Millisecond)
		}
		exited := make(chan struct{})
		go func() { driver.Wait(); close(exited) }()
		// When the moment does not come: a random moment once this driver is under way.
		var fallback time.Time
		patience := time.Duration(200+r.IntN(1000)) * time.Millisecond
		if moment == "sync" || moment == "scale-up" {
			patience = 5 * time.Second // more than a stage: the moment comes first, mostly
		}
	wait:
		for {
			select {
			case <-exited:
				break wait
			case <-time.After(5 * time.Millisecond):
				b, _ := os.ReadFile(filepath.Join(state, rundir.Journal))
				hit := trigger(string(b))
				if news := string(b[min(len(before), len(b)):]); fallback.IsZero() && strings.Contains(news, `"ev":"launch"`) {
					fallback = time.Now().Add(patience)
				}
				if !hit && total < campaign && !fallback.IsZero() && time.Now().After(fallback) {
					hit, moment = true, moment+" (by timer)"
				}
				if hit {
					driver.Process.Signal(syscall.SIGKILL)
					<-exited
					kills[moment]++
					break wait
				}
			}
		}
		if driver.ProcessState.Success() {
			break // it finished before the trigger
		}
		if status := driver.ProcessState.Sys().(syscall.WaitStatus); !status.Signaled() {
			t.Fatalf("%s exited %d by itself: %s", args[0], driver.ProcessState.ExitCode(), driver.Stdout)
		}
		if i > 200 {
			t.Fatal("the run never finishes")
		}
	}
	total := 0
	for _, n := range kills {
		total += n
	}
	t.Logf("killed the driver %d times: %v", total, kills)
	if total < campaign*5/6 {
		t.Fatalf("only %d kills: the campaign needs at least %d", total, campaign*5/6)
	}
	events := readJournal(t, state)
	if twice := doneTwice(events); twice != "" {
		t.Fatalf("%s done twice", twice)
	}
	if got, want := syncs(events), syncs(clean); got != want {
		t.Fatalf("survivors after the campaign:\n%s\nclean run:\n%s", got, want)
	}
	got, want := readRunReport(t, state), readRunReport(t, whole)
	if got.Best == nil || got.Best.Trial != want.Best.Trial || got.Best.Metric != want.Best.Metric {
		t.Fatalf("best %+v; clean run %+v", got.Best, want.Best)
	}
	// The dead drivers' node time adds to the cost: clearly so after two dozen kills (make soak).
	// After four, two wall-clock runs' costs differ by the machine's load as much as by it;
	// TestFaultCampaign holds every node's billing to the world's, exactly, in virtual time.
	if campaign >= 20 && got.Realized.Cost <= want.Realized.Cost {
		out, _, _ := rb(t, "status", state)
		t.Log(out)
		t.Fatalf("realized cost $%.4f after %d crashes is not above the clean run's $%.4f: dead drivers' node time is missing", got.Realized.Cost, total, want.Realized.Cost)
	}
	if n := processesWith(filepath.Join(tmp, "trainer.yaml")); n != 0 {
		t.Fatalf("%d trainer processes left", n)
	}
	if n := heldNodes(t, state); n != 0 {
		t.Fatalf("%d nodes held after the run", n)
	}
}

func doneTwice(events []journal.Event) string {
	seen := map[string]bool{}
	for _, e := range events {
		if e.Ev == journal.EvDone {
			k := e.Trial + " stage " + strconv.Itoa(e.Stage)
			if seen[k] {
				return k
			}
			seen[k] = true
		}
	}
	return ""
}

func syncs(events []journal.Event) string {
	var b strings.Builder
	for _, e := range events {
		if e.Ev == journal.EvSync {
			fmt.Fprintf(&b, "bracket %d stage %d: %v\n", e.Bracket, e.Stage, e.Keep)
		}
	}
	return b.String()
}

// A worker left by a driver that died stops by itself: when the driver's heartbeat is gone, and
// past its launch's deadline. Its trainer gets SIGTERM, its checkpoint is saved, and the wrapper
// says why (exit 124).
func TestWorkerStopsWithoutItsDriver(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		why  string
	}{
		{"heartbeat", []string{"--run", "r-gone", "--heartbeat-timeout", "1s"}, "no heartbeat from the driver of run r-gone"},
		{"deadline", []string{"--timeout", "1s"}, "past the launch's deadline of 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := t.TempDir()
			args := append([]string{"worker", "--trial", "t1", "--rank", "0", "--grace", "2s"}, c.args...)
			args = append(args, "--", "sh", "-c", `trap 'echo 3 > "$RB_CHECKPOINT_DIR/state"; exit 0' TERM; echo '@rb {"iter": 1, "score": 0.5}'; sleep 60 & wait`)
			cmd := exec.Command(binary, args...)
			cmd.Env = append(os.Environ(), "RB_CHECKPOINTS=file://"+store, "RB_TARGET_ITER=5")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 124 || !strings.Contains(out.String(), c.why) {
				t.Fatalf("worker: %v\n%s", err, out.String())
			}
			if el := time.Since(start); el > 8*time.Second {
				t.Fatalf("the worker went on for %v", el)
			}
			if saved, _ := filepath.Glob(filepath.Join(store, "trials", "t1", "*")); len(saved) == 0 {
				t.Fatalf("no checkpoint saved; output:\n%s", out.String())
			}
		})
	}
}
