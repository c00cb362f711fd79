package gangtest

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/gang"
)

var cases = []struct {
	name   string
	run    func(t *testing.T, e Env)
	script bool // written in shell: skipped for runtimes that run no commands
}{
	{"ReportsInOrder", reportsInOrder, true},
	{"CheckpointRestored", checkpointRestored, true},
	{"WorkerFailureStopsGang", workerFailureStopsGang, true},
	{"LaunchAllOrNothing", launchAllOrNothing, true},
	{"Unplaceable", unplaceable, true},
	{"StopThenKill", stopThenKill, true},
	{"StoppedGangResumes", stoppedGangResumes, true},
	{"RelaunchAtTargetReReports", relaunchAtTargetReReports, true},
	{"LogsEveryWorker", logsEveryWorker, true},
	{"TrainsToTheTarget", trainsToTheTarget, false},
	{"StopKeepsWhatItReached", stopKeepsWhatItReached, false},
	{"InterruptedNamesTheNode", interruptedNamesTheNode, false},
	{"UnplaceableNode", unplaceableNode, false},
}

// with sets the shell variable M to dir in front of script, for marker files.
func with(dir, script string) string { return "M='" + dir + "'\n" + script }

// Rank 0's reports arrive in order, malformed ones skipped, other ranks' ignored; every worker
// gets the contract's environment; the last report is complete; exit 0 saves the checkpoint with
// the last report beside it.
func reportsInOrder(t *testing.T, e Env) {
	script := `if [ "$RANK" = 0 ]; then
  ok=1
  [ "$RB_TRIAL_ID" = rt-reports ] || ok=0
  [ "$RB_EXPERIMENT" = gangtest ] || ok=0
  [ "$RB_PARAMS" = '{"lr":0.1}' ] || ok=0
  [ -d "$RB_CHECKPOINT_DIR" ] || ok=0
  [ "$MASTER_ADDR" = "` + e.Nodes[0].Addr + `" ] || ok=0
  [ "$CUDA_VISIBLE_DEVICES" = 0 ] || ok=0
  echo "epoch log"
  echo '@rb {"iter": 1, "loss": 2.5}'
  echo '@rb broken'
  echo "@rb {\"iter\": 2, \"env_ok\": $ok, \"world\": $WORLD_SIZE, \"start\": $RB_START_ITER, \"target\": $RB_TARGET_ITER, \"port\": $MASTER_PORT}"
  echo 3 > "$RB_CHECKPOINT_DIR/state"
  echo '@rb {"iter": 3, "acc": 0.75, "loss": 0.5}'
else
  echo '@rb {"iter": 99, "acc": 0}'
fi`
	reps := e.run(t, e.gang("rt-reports", 2, 0, 3, script))
	if got := iters(reps); !sameInts(got, []int{1, 2, 3}) {
		t.Fatalf("iterations reported %v, want [1 2 3]: rank 0's reports in order, the malformed one skipped, rank 1's ignored", got)
	}
	m := reps[1].Metrics
	if m["env_ok"] != 1 || m["world"] != 2 || m["start"] != 0 || m["target"] != 3 || m["port"] <= 0 {
		t.Errorf("rank 0's environment as reported: %v", m)
	}
	if last := reps[2].Metrics; len(last) != 2 || last["acc"] != 0.75 || last["loss"] != 0.5 {
		t.Errorf("last report's metrics %v, want acc 0.75 and loss 0.5", last)
	}
	for i, r := range reps {
		if r.At.IsZero() || (i > 0 && r.At.Before(reps[i-1].At)) {
			t.Errorf("report %d at %v: reports are timed, in order", i, r.At)
		}
	}
	if n := e.versions(t, "rt-reports"); n != 1 {
		t.Fatalf("%d checkpoint versions after exit 0, want 1", n)
	}
	state, kept, ok := e.saved(t, "rt-reports")
	if state != "3" || !ok || kept.Iter != 3 || kept.Metrics["acc"] != 0.75 {
		t.Fatalf("saved checkpoint: state %q, kept report %+v (%v); want rank 0's state and its last report", state, kept, ok)
	}
}

// The next launch of a trial starts every worker from the checkpoint the last one saved.
func checkpointRestored(t *testing.T, e Env) {
	first := `if [ "$RANK" = 0 ]; then echo 7 > "$RB_CHECKPOINT_DIR/state"; echo '@rb {"iter": 2}'; fi`
	e.run(t, e.gang("rt-restore", 2, 0, 2, first))
	next := `s=$(cat "$RB_CHECKPOINT_DIR/state") || exit 5
if [ "$RANK" = 0 ]; then echo "@rb {\"iter\": 4, \"restored\": $s}"; fi`
	reps := e.run(t, e.gang("rt-restore", 2, 2, 4, next))
	if len(reps) != 1 || reps[0].Iter != 4 || reps[0].Metrics["restored"] != 7 {
		t.Fatalf("second launch reported %+v, want iteration 4 from the restored state 7", reps)
	}
}

// One worker's nonzero exit fails the gang: the others get SIGTERM promptly, Wait returns the
// failure (not ErrStopped), nothing is saved, and the failing worker's output is in the log.
func workerFailureStopsGang(t *testing.T, e Env) {
	dir, touched := markers(t)
	// Rank 1 fails once the others are up with their trap set.
	script := with(dir, `if [ "$RANK" = 1 ]; then
  while [ ! -e "$M/up-0" ] || [ ! -e "$M/up-2" ]; do sleep 0.05; done
  echo "rank 1 gives up" >&2
  touch "$M/gave-up"
  exit 3
fi
trap 'touch "$M/term-$RANK"; exit 143' TERM
if [ "$RANK" = 0 ]; then echo 1 > "$RB_CHECKPOINT_DIR/state"; echo '@rb {"iter": 1}'; fi
touch "$M/up-$RANK"
sleep 60 & wait`)
	h := e.launch(t, e.gang("rt-fail", 3, 0, 2, script))
	_, err := drain(t, h)
	if err == nil || errors.Is(err, gang.ErrStopped) {
		t.Fatalf("wait: %v, want the worker's failure", err)
	}
	// From the failure, not from the launch: how long a gang takes to start is the scheduler's
	// and the machine's load's (a loaded CI machine once took 16.8 s from launch to the end).
	failed, err := os.Stat(filepath.Join(dir, "gave-up"))
	if err != nil {
		t.Fatalf("rank 1 did not give up: %v", err)
	}
	if took := time.Since(failed.ModTime()); took > e.Grace+e.Slack {
		t.Errorf("the gang ended %v after rank 1 failed; a failure must stop the rest within %v", took, e.Grace+e.Slack)
	}
	if got := touched("term-"); !slices.Equal(got, []string{"term-0", "term-2"}) {
		t.Errorf("workers that got SIGTERM: %v, want ranks 0 and 2", got)
	}
	if n := e.versions(t, "rt-fail"); n != 0 {
		t.Errorf("a failed gang saved %d checkpoint versions", n)
	}
	if log := e.log(t, "rt-fail"); !strings.Contains(log, "rank 1 gives up") {
		t.Errorf("the failing worker's output is not in the log:\n%s", log)
	}
}

// A gang that cannot start whole starts nothing.
func launchAllOrNothing(t *testing.T, e Env) {
	dir, touched := markers(t)
	script := with(dir, `touch "$M/ran-$RANK"`)
	badEnv := e.gang("rt-none", 2, 0, 1, script)
	badEnv.Workers[1].Env.Params = map[string]any{"lr": math.Inf(1)} // no JSON for it
	noCommand := e.gang("rt-none", 2, 0, 1, script)
	noCommand.Command = nil
	noWorkers := e.gang("rt-none", 0, 0, 1, script)
	for _, c := range []struct {
		name string
		g    gang.Gang
	}{{"unencodable environment of rank 1", badEnv}, {"no command", noCommand}, {"no workers", noWorkers}} {
		t.Run(c.name, func(t *testing.T) {
			h, err := e.Runtime.Launch(context.Background(), c.g)
			if err == nil {
				h.Stop()
				drain(t, h)
				t.Fatal("launch succeeded")
			}
		})
	}
	time.Sleep(time.Second)
	if got := touched("ran-"); len(got) != 0 {
		t.Fatalf("refused gangs ran workers: %v", got)
	}
	if n := e.versions(t, "rt-none"); n != 0 {
		t.Fatalf("refused gangs saved %d checkpoint versions", n)
	}
}

// A gang with a worker on a node the runtime cannot place it on fails in Launch, promptly, with
// an error wrapping gang.ErrUnplaceable, and none of its workers runs.
func unplaceable(t *testing.T, e Env) {
	if e.Unplaceable == "" {
		t.Skip("this runtime never finds a gang unplaceable")
	}
	dir, touched := markers(t)
	g := e.gang("rt-unplaceable", 2, 0, 1, with(dir, `touch "$M/ran-$RANK"; sleep 60`))
	g.Workers[1].Node.ID = e.Unplaceable
	start := time.Now()
	h, err := e.Runtime.Launch(context.Background(), g)
	if err == nil {
		h.Stop()
		drain(t, h)
		t.Fatal("launch of an unplaceable gang succeeded")
	}
	if !errors.Is(err, gang.ErrUnplaceable) {
		t.Fatalf("launch: %v, want an error wrapping gang.ErrUnplaceable", err)
	}
	if took := time.Since(start); took > e.Slack {
		t.Errorf("refused after %v, want within %v", took, e.Slack)
	}
	time.Sleep(time.Second)
	if got := touched("ran-"); len(got) != 0 {
		t.Fatalf("workers of an unplaceable gang ran: %v", got)
	}
}

// Stop sends SIGTERM to every worker, and SIGKILL to those still running after the grace
// period; Wait returns ErrStopped, and the checkpoint is saved whatever the exit codes.
func stopThenKill(t *testing.T, e Env) {
	for _, c := range []struct {
		name, trap string
		killed     bool // ignores SIGTERM: ends only by SIGKILL, after the grace period
	}{
		{"ignores SIGTERM", `trap '' TERM`, true},
		{"exits 0 on SIGTERM", `trap 'touch "$M/term-$RANK"; exit 0' TERM`, false},
		{"exits 3 on SIGTERM", `trap 'touch "$M/term-$RANK"; exit 3' TERM`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, touched := markers(t)
			id := "rt-stop-" + strings.Fields(c.name)[1]
			// Rank 0 reports once every worker is up with its trap set, so that the stop finds all.
			script := with(dir, c.trap+`
if [ "$RANK" = 0 ]; then
  while [ ! -e "$M/up-1" ]; do sleep 0.05; done
  echo 1 > "$RB_CHECKPOINT_DIR/state"
  echo '@rb {"iter": 1, "acc": 0.5}'
else
  touch "$M/up-$RANK"
fi
sleep 60 & wait`)
			h := e.launch(t, e.gang(id, 2, 0, 5, script))
			if _, ok := <-h.Reports(); !ok {
				t.Fatalf("the gang ended before its first report: %v", h.Wait())
			}
			start := time.Now()
			h.Stop()
			_, err := drain(t, h)
			took := time.Since(start)
			if !errors.Is(err, gang.ErrStopped) {
				t.Fatalf("wait after stop: %v, want ErrStopped", err)
			}
			if took > e.Grace+e.Slack {
				t.Errorf("stopped after %v, want within the grace period %v plus %v", took, e.Grace, e.Slack)
			}
			if c.killed && took < e.Grace*9/10 {
				t.Errorf("killed after %v, before the grace period %v was over", took, e.Grace)
			}
			if got := touched("term-"); !c.killed && !(slices.Contains(got, "term-0") && slices.Contains(got, "term-1")) {
				t.Errorf("marker files %v: every worker must get SIGTERM", got)
			}
			if n := e.versions(t, id); n != 1 {
				t.Fatalf("%d checkpoint versions after a stop, want 1", n)
			}
			if state, kept, ok := e.saved(t, id); state != "1" || !ok || kept.Iter != 1 {
				t.Fatalf("saved after the stop: state %q, kept report %+v (%v)", state, kept, ok)
			}
		})
	}
}

// A stopped gang keeps what it reached; its relaunch, short of the target, trains from there.
func stoppedGangResumes(t *testing.T, e Env) {
	h := e.launch(t, e.gang("rt-resume", 1, 0, 2, `echo 1 > "$RB_CHECKPOINT_DIR/state"; echo '@rb {"iter": 1}'; sleep 60 & wait`))
	if _, ok := <-h.Reports(); !ok {
		t.Fatalf("the gang ended before its first report: %v", h.Wait())
	}
	h.Stop()
	if _, err := drain(t, h); !errors.Is(err, gang.ErrStopped) {
		t.Fatalf("wait after stop: %v", err)
	}
	reps := e.run(t, e.gang("rt-resume", 1, 1, 2, `s=$(cat "$RB_CHECKPOINT_DIR/state"); echo "@rb {\"iter\": 2, \"from\": $s}"`))
	if len(reps) != 1 || reps[0].Iter != 2 || reps[0].Metrics["from"] != 1 {
		t.Fatalf("relaunch reported %+v, want iteration 2 trained from the stopped gang's state 1", reps)
	}
}

// A relaunch whose checkpoint is at the target already trains nothing (the scripts would fail if
// they ran again) and delivers the kept report again, time included, saving no new version; a
// later target trains again.
func relaunchAtTargetReReports(t *testing.T, e Env) {
	dir, _ := markers(t)
	script := with(dir, `[ -e "$M/ran-$RANK" ] && exit 7
touch "$M/ran-$RANK"
if [ "$RANK" = 0 ]; then echo 2 > "$RB_CHECKPOINT_DIR/state"; echo '@rb {"iter": 2, "acc": 0.75}'; fi
exit 0`)
	first := e.run(t, e.gang("rt-again", 2, 0, 2, script))
	if len(first) != 1 || first[0].Iter != 2 {
		t.Fatalf("first launch reported %+v", first)
	}
	again := e.run(t, e.gang("rt-again", 2, 0, 2, script))
	if len(again) != 1 || again[0].Iter != 2 || again[0].Metrics["acc"] != 0.75 || len(again[0].Metrics) != 1 || !again[0].At.Equal(first[0].At) {
		t.Fatalf("relaunch at the target reported %+v, want the kept %+v", again, first)
	}
	if n := e.versions(t, "rt-again"); n != 1 {
		t.Fatalf("re-reporting saved a new checkpoint: %d versions", n)
	}
	next := e.run(t, e.gang("rt-again", 2, 2, 3, `if [ "$RANK" = 0 ]; then echo '@rb {"iter": 3, "acc": 0.8}'; fi`))
	if len(next) != 1 || next[0].Iter != 3 {
		t.Fatalf("the next stage reported %+v, want iteration 3", next)
	}
}

// Every worker's standard output and error end up in LogDir/<trial>.log.
func logsEveryWorker(t *testing.T, e Env) {
	e.run(t, e.gang("rt-logs", 3, 0, 1, `echo "stdout of rank $RANK"; echo "stderr of rank $RANK" >&2
if [ "$RANK" = 0 ]; then echo '@rb {"iter": 1}'; fi`))
	log := e.log(t, "rt-logs")
	for _, want := range []string{"stdout of rank 0", "stderr of rank 0", "stdout of rank 1", "stderr of rank 1", "stdout of rank 2",
		"stderr of rank 2", `"iter": 1}`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}
