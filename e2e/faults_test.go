package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/syncio"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// cleanBest is the best trial of the synthetic job run clean at time scale 0.02, run once for
// every test that compares a faulted run's winner with it.
var cleanBest = sync.OnceValues(func() (*runstate.BestTrial, error) {
	state, err := os.MkdirTemp("", "rubberband-clean")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(state)
	cmd := exec.Command(binary, "run", "e2e/testdata/synthetic.yaml", "--state", filepath.Join(state, "s"), "--time-scale", "0.02")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); !ranToEnd(err) {
		return nil, fmt.Errorf("clean run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(state, "s", rundir.ReportFile))
	if err != nil {
		return nil, err
	}
	var rep runstate.Report
	if err := json.Unmarshal(b, &rep); err != nil || rep.Best == nil {
		return nil, fmt.Errorf("clean run's report: %v", err)
	}
	return rep.Best, nil
})

// sameWinner fails t unless the run in state finished with the clean run's best trial.
func sameWinner(t *testing.T, state string) {
	t.Helper()
	want, err := cleanBest()
	if err != nil {
		t.Fatal(err)
	}
	got := readRunReport(t, state)
	if !got.Finished || got.Best == nil || got.Best.Trial != want.Trial || got.Best.Metric != want.Metric {
		t.Fatalf("resumed best %+v, clean best %+v", got.Best, want)
	}
}

// smallDisk mounts a tmpfs of size bytes at a new directory and unmounts it when the test ends:
// a real file system that fills up (ENOSPC), where the checkpoints of a run go.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (root needed): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes path until the disk it is on is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for { // the last pages too
		if _, err := f.Write(block[:512]); err != nil {
			return
		}
	}
}

// stageProgress reads a progress line of `rubberband run` (standard error): its stage and the
// trials done in it.
var stageProgress = regexp.MustCompile(`stage (\d+)/\d+: (\d+)/\d+ trials done`)

// runUntilDone starts the built CLI's `run` with args, from the repository root, and returns
// once its progress says at least n trials of its first stage are done (or a later stage has
// begun): read from its standard error as it writes it, nothing polled. wait waits for the
// run's end; out holds all its standard error.
func runUntilDone(t *testing.T, n int, args ...string) (out *syncio.Buffer, wait func() error) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run"}, args...)...)
	cmd.Dir = ".."
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out = &syncio.Buffer{}
	reached, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(nil, 1<<20)
		for seen := false; sc.Scan(); {
			fmt.Fprintln(out, sc.Text())
			if m := stageProgress.FindStringSubmatch(sc.Text()); !seen && m != nil && (m[1] != "1" || atoi(m[2]) >= n) {
				seen = true
				close(reached)
			}
		}
		io.Copy(out, pipe) // past a line too long to scan
	}()
	select {
	case <-reached:
	case <-read:
		cmd.Wait()
		t.Fatalf("the run ended before %d trials were done:\n%s", n, out)
	} // a run that hangs is go test -timeout's to end, with every goroutine's stack
	return out, func() error { <-read; return cmd.Wait() }
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// A run whose checkpoint disk fills in mid-run pauses: no try is spent (no fail event), the
// journal says what is full and where, its nodes are released at the pause (the bill stops
// there), and it exits 4. Once there is room again, resume finishes it with the clean run's
// winner. Before, every save that met ENOSPC was a failed try: three went in milliseconds, the
// trial was given up and the winner changed.
func TestRunPausesOnFullDisk(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	disk := smallDisk(t, "4m")
	src, err := syntheticSource()
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(tmp, "full.yaml")
	os.WriteFile(specFile, append(src, []byte("checkpoints: {url: \"file://"+disk+"\"}\n")...), 0o644)

	state := filepath.Join(tmp, "paused")
	stderr, wait := runUntilDone(t, 4, specFile, "--state", state, "--time-scale", "0.02")
	fill(t, filepath.Join(disk, "filler"))
	err = wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("a run whose disk filled: %v, want exit 4 (paused)\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "paused: disk full at "+disk) || !strings.Contains(stderr.String(), "resume") {
		t.Fatalf("stderr does not say what is full, where, and how to go on:\n%s", stderr.String())
	}
	events := readJournal(t, state)
	stop := events[len(events)-1]
	if stop.Ev != journal.EvStop || stop.Cause != string(journal.StopPaused) || stop.Fault != "disk full" || !strings.HasPrefix(stop.Where, disk) {
		t.Fatalf("the journal's last event is %+v, want a paused stop naming the disk", stop)
	}
	held := map[string]bool{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvFail:
			t.Fatalf("a try was spent on the full disk: %+v", e)
		case journal.EvNodeUp:
			held[e.Node.ID] = true
		case journal.EvNodeOff:
			for _, id := range e.Nodes {
				delete(held, id)
			}
			if e.At.After(stop.At) {
				t.Fatalf("a node was billed past the pause: %+v", e)
			}
		}
	}
	if len(held) > 0 || len(stop.Nodes) == 0 {
		t.Fatalf("nodes still held at the pause: %v (the pause released %v)", held, stop.Nodes)
	}
	if n, _ := os.ReadFile(filepath.Join(state, rundir.NodesFile)); strings.Contains(string(n), "local-") {
		t.Fatalf("the provider still holds nodes of the paused run: %s", n)
	}
	if out, _, _ := rb(t, "list", "--root", tmp); !strings.Contains(out, "paused") {
		t.Fatalf("list does not show the run paused:\n%s", out)
	}

	os.Remove(filepath.Join(disk, "filler"))
	if out, errOut, code := rb(t, "resume", state); !finishedCode(code) {
		t.Fatalf("resume once there is room: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, e := range readJournal(t, state) {
		if e.Ev == journal.EvFail {
			t.Fatalf("a try was spent: %+v", e)
		}
	}
	sameWinner(t, state)
}

// On a server (SQLite), a run whose checkpoint disk fills is paused, not failed: the server does
// not restart its driver into the same fault, the run says what is full and where, and
// `rubberband resume RUN` (POST /api/v1/runs/RUN/resume) queues it again once there is room; it
// finishes with the clean run's winner. Before, such a run ended failed for good, blaming its
// trainers.
func TestServerPausesOnFullDisk(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	disk := smallDisk(t, "4m")
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--root", root, "--storage-prefix", "file://"+disk); code != 0 {
		t.Fatalf("teams add: %s", errOut)
	}
	out, errOut, code := rb(t, "server", "users", "add", "alice", "--team", "ml", "--root", root)
	if code != 0 {
		t.Fatalf("users add: %s", errOut)
	}
	token := strings.TrimSpace(out)
	src, err := syntheticSource()
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(t.TempDir(), "full.yaml")
	os.WriteFile(specFile, append(src, []byte("checkpoints: {url: \"file://"+disk+"\"}\n")...), 0o644)
	srv := startServer(t, "--root", root)
	env := []string{"RUBBERBAND_SERVER=" + srv.base, "RUBBERBAND_TOKEN=" + token}
	out, errOut, code = rbEnv(t, binary, env, "run", specFile, "--detach")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	cl, _ := client.New(srv.base, token)
	waitEvent(t, cl, id, journal.EvDone)
	fill(t, filepath.Join(disk, "filler"))
	run := waitRun(t, cl, id, "paused", func(r client.Run) bool { return r.State.Settled() })
	if run.State != store.Paused || !strings.Contains(run.Message, "disk full at "+disk) {
		t.Fatalf("the run whose disk filled: %s (%s), want paused naming the disk\n%s", run.State, run.Message, srv.log)
	}
	if strings.Contains(srv.log.String(), "resuming it from its journal") {
		t.Fatalf("the server restarted the paused run's driver into the same fault:\n%s", srv.log)
	}
	if out, _, _ := rbEnv(t, binary, env, "list"); !strings.Contains(out, "paused") {
		t.Fatalf("list does not show the run paused:\n%s", out)
	}

	os.Remove(filepath.Join(disk, "filler"))
	if out, errOut, code := rbEnv(t, binary, env, "resume", id); !finishedCode(code) {
		t.Fatalf("resume %s on the server: exit %d\n%s\n%s", id, code, out, errOut)
	}
	run, err = cl.Run(context.Background(), id)
	if err != nil || run.State != store.Finished {
		t.Fatalf("the resumed run: %s (%v)", run.State, err)
	}
	sameWinner(t, filepath.Join(root, "teams", "ml", id))
	for _, e := range readJournal(t, filepath.Join(root, "teams", "ml", id)) {
		if e.Ev == journal.EvFail {
			t.Fatalf("a try was spent on the full disk: %+v", e)
		}
	}
}

// A trainer that floods its output (4 MB a launch, and malformed report lines that the
// driver log notes one by one) cannot fill the disk: each trial's log and the driver log stay
// within --trainer-log-mb, rotated once, with a line saying so. Before, a trial's log grew as
// fast as its trainer wrote (386 MB in 6 s).
func TestTrainerLogIsCapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := filepath.Join(dir, "flood.yaml")
	os.WriteFile(spec, []byte(`name: flood
deadline: 1h
objective: {metric: score}
algorithm: {sha: {trials: 2, min_iters: 1, max_iters: 2, eta: 2}}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [sh, -c, 'yes "@rb not a report" | head -c 60000; yes "$(head -c 999 /dev/zero | tr "\0" x)" | head -c 4000000; exit 1']}
cluster: {gpus_per_node: 1, price_per_hour: 1, max_nodes: 2}
profile: {iter_latency: {1: {mean: 1}}}
planner: {samples: 20}
`), 0o644)
	state := filepath.Join(dir, "state")
	_, errOut, code := rb(t, "run", spec, "--state", state, "--time-scale", "0.01", "--trainer-log-mb", "1")
	if code != 1 {
		t.Fatalf("a run of trainers that only fail: exit %d, want 1\n%.2000s", code, errOut)
	}
	logs, _ := filepath.Glob(filepath.Join(state, rundir.LogsDir, "*.log"))
	if len(logs) != 2 {
		t.Fatalf("trial logs: %v", logs)
	}
	for _, p := range append(logs, filepath.Join(state, rundir.DriverLog)) {
		for _, f := range []string{p, p + ".1"} {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatalf("%s: %v (the flood should have rotated it once)", f, err)
			}
			if st.Size() > 1<<20 {
				t.Errorf("%s holds %d bytes, past the bound of 1 MiB", f, st.Size())
			}
		}
		if b, _ := os.ReadFile(p); !strings.Contains(string(b), "this log reached its bound of 1048576 bytes") {
			t.Errorf("%s does not say it was rotated", p)
		}
	}
	if _, errOut, code := rb(t, "run", spec, "--state", filepath.Join(dir, "bad"), "--trainer-log-mb", "0"); code != 2 || !strings.Contains(errOut, "--trainer-log-mb") {
		t.Errorf("--trainer-log-mb 0: exit %d: %s", code, errOut)
	}
}

// The H7 layout: the whole state directory (journal, checkpoints, logs, the provider's state) on
// one disk that fills in mid-run. The journal kept room for this (journal.jsonl.reserve): the
// run pauses with its pause and the release of its nodes journaled, spends no try, and resumes
// to the clean run's winner once there is room.
func TestRunPausesOnFullStateDisk(t *testing.T) {
	t.Parallel()
	disk := smallDisk(t, "16m")
	state := filepath.Join(disk, "state")
	stderr, wait := runUntilDone(t, 4, "e2e/testdata/synthetic.yaml", "--state", state, "--time-scale", "0.02")
	fill(t, filepath.Join(disk, "filler"))
	err := wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(stderr.String(), "paused: disk full at "+disk) {
		t.Fatalf("a run whose disk filled: %v, want exit 4 saying the disk is full\n%s", err, stderr.String())
	}
	events := readJournal(t, state)
	stop := events[len(events)-1]
	if stop.Ev != journal.EvStop || stop.Cause != string(journal.StopPaused) || len(stop.Nodes) == 0 {
		t.Fatalf("the journal's last event is %+v, want a paused stop that released the nodes\n%s", stop, stderr.String())
	}
	for _, e := range events {
		if e.Ev == journal.EvFail {
			t.Fatalf("a try was spent on the full disk: %+v", e)
		}
	}
	os.Remove(filepath.Join(disk, "filler"))
	if out, errOut, code := rb(t, "resume", state); !finishedCode(code) {
		t.Fatalf("resume once there is room: exit %d\n%s\n%s", code, out, errOut)
	}
	sameWinner(t, state)
	if _, err := os.Stat(filepath.Join(state, rundir.Journal+".reserve")); err != nil {
		t.Fatalf("the resumed journal keeps no room for the next pause: %v", err)
	}
}
