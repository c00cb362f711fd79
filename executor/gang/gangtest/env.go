package gangtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Env is one runtime under test, fresh for each case: its own checkpoint store and log directory.
type Env struct {
	Runtime gang.Runtime
	// Store is where the runtime saves checkpoints.
	Store checkpoint.Store
	// Nodes are where workers run: worker i of a gang on Nodes[i % len(Nodes)], with GPU
	// i / len(Nodes) of it. Two nodes or more make gangs span nodes.
	Nodes []cloud.Node
	// Unplaceable names a node the runtime cannot place a worker on (one its cluster does not
	// have); empty for a runtime that never finds a gang unplaceable (the process runtime runs
	// every worker on this machine), whose case is then skipped.
	Unplaceable string
	// LogDir is where the runtime keeps LogDir/<trial>.log.
	LogDir string
	// Grace is the runtime's grace period between SIGTERM and SIGKILL.
	Grace time.Duration
	// Slack is how long the runtime may take on top of what its trainers do: to start or refuse a
	// gang, notice a failure and stop the rest, collect the output (default 5 s).
	Slack time.Duration
	// Counter, when set, makes a gang of n workers whose trainer trains the trial from its
	// checkpoint to target, one report per iteration, and keeps what it reached when stopped;
	// by default, a gang of the suite's own, running a shell loop. A runtime that runs no
	// commands (a fake, the virtual world) trains its own way whatever the command, and sets
	// NoScripts, which skips the cases written in shell.
	Counter   func(trialID string, n, start, target int) gang.Gang
	NoScripts bool
	// Interrupt, when set, gives a node its interruption notice (a spot notice), as the
	// runtime's platform would.
	Interrupt func(node, why string)
	// Clock is the runtime's time (default the wall clock); Within runs each case's body, as an
	// actor when the clock is a Sim (default: at once).
	Clock  clock.Clock
	Within func(t *testing.T, f func())
}

func (e Env) clock() clock.Clock { return clock.Or(e.Clock) }

// counter is the Env's counting gang: its own, or one in shell.
func (e Env) counter(trialID string, n, start, target int) gang.Gang {
	if e.Counter != nil {
		return e.Counter(trialID, n, start, target)
	}
	return e.gang(trialID, n, start, target, CounterScript)
}

// CounterScript trains from the checkpoint's iteration to the target, an iteration every 50 ms,
// and keeps what it reached when stopped. SIGTERM only marks the stop: an iteration under way is
// finished, reported and saved whole, so that what it saved is what it reported (a trap that
// saved at once could save an iteration whose report it never printed).
const CounterScript = `i=$(cat "$RB_CHECKPOINT_DIR/state" 2>/dev/null || echo 0)
stop=
trap 'stop=1' TERM
while [ "$i" -lt "$RB_TARGET_ITER" ] && [ -z "$stop" ]; do
  sleep 0.05 & wait
  if [ -n "$stop" ]; then break; fi
  i=$((i+1))
  if [ "$RANK" = 0 ]; then echo "@rb {\"iter\": $i}"; fi
  echo $i > "$RB_CHECKPOINT_DIR/state"
done
echo $i > "$RB_CHECKPOINT_DIR/state"`

// Run runs the whole contract, one subtest per case; newEnv is called once per case.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if e.Slack == 0 {
				e.Slack = 5 * time.Second
			}
			if len(e.Nodes) == 0 {
				t.Fatal("gangtest: the Env has no nodes")
			}
			if c.script && e.NoScripts {
				t.Skip("a case in shell, and this runtime runs no commands")
			}
			if e.Within == nil {
				c.run(t, e)
				return
			}
			e.Within(t, func() { c.run(t, e) })
		})
	}
}

// gang is a gang of n workers running script with /bin/sh, from iteration start to target, with
// {"lr": 0.1} as its parameters.
func (e Env) gang(trialID string, n, start, target int, script string) gang.Gang {
	g := gang.Gang{Trial: trialID, Command: []string{"/bin/sh", "-c", script}}
	for rank := range n {
		node := e.Nodes[rank%len(e.Nodes)]
		g.Workers = append(g.Workers, gang.Worker{Node: node, Env: trial.Env{TrialID: trialID, Experiment: "gangtest",
			Params: map[string]any{"lr": 0.1}, StartIter: start, TargetIter: target, Rank: rank, WorldSize: n,
			LocalRank: rank / len(e.Nodes), MasterAddr: e.Nodes[0].Addr, GPUs: []int{rank / len(e.Nodes)}}})
	}
	return g
}

// launch starts g or fails the test.
func (e Env) launch(t *testing.T, g gang.Gang) gang.Handle {
	t.Helper()
	h, err := e.Runtime.Launch(context.Background(), g)
	if err != nil {
		t.Fatalf("launch %s: %v", g.Trial, err)
	}
	t.Cleanup(h.Stop) // a test that fails half way leaves nothing running
	return h
}

// drain reads a handle's reports to the end and returns them with what Wait says, checking that
// Exited is closed by the time Wait returns.
func drain(t *testing.T, h gang.Handle) ([]trial.Report, error) {
	return drainOn(t, clock.Wall{}, h)
}

// drainOn is drain, receiving as an actor of c.
func drainOn(t *testing.T, c clock.Clock, h gang.Handle) ([]trial.Report, error) {
	t.Helper()
	var reps []trial.Report
	for {
		r, ok, _ := clock.Recv(context.Background(), c, h.Reports())
		if !ok {
			break
		}
		reps = append(reps, r)
	}
	err := h.Wait()
	select {
	case <-h.Exited():
	default:
		t.Error("Wait returned before Exited was closed")
	}
	return reps, err
}

// run launches g and returns its reports, failing the test unless Wait returns nil.
func (e Env) run(t *testing.T, g gang.Gang) []trial.Report {
	t.Helper()
	reps, err := drain(t, e.launch(t, g))
	if err != nil {
		t.Fatalf("gang %s (%d -> %d): %v", g.Trial, g.Workers[0].Env.StartIter, g.Workers[0].Env.TargetIter, err)
	}
	return reps
}

// versions is how many checkpoint versions the store holds for a trial.
func (e Env) versions(t *testing.T, trialID string) int {
	t.Helper()
	list, err := e.Store.List(context.Background(), "trials/"+trialID+"/")
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// saved restores a trial's newest checkpoint into a fresh directory and returns its state file
// (what the scripts write) and the report kept beside it.
func (e Env) saved(t *testing.T, trialID string) (state string, kept trial.Report, ok bool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	if _, found, err := checkpoint.RestoreDir(context.Background(), e.Store, trialID, dir); err != nil || !found {
		t.Fatalf("restore %s: found %v, %v", trialID, found, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "state"))
	kept, ok, err := trial.LoadLastReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b)), kept, ok
}

// log is the trial's log.
func (e Env) log(t *testing.T, trialID string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.LogDir, trialID+".log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// markers is a directory the scripts touch files in (workers run on this machine, whatever
// the runtime) and a way to list, sorted, those they touched whose names start with a prefix.
func markers(t *testing.T) (dir string, touched func(prefix string) []string) {
	dir = t.TempDir()
	return dir, func(prefix string) []string {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) {
				names = append(names, e.Name())
			}
		}
		return names
	}
}

func iters(reps []trial.Report) []int {
	out := make([]int, len(reps))
	for i, r := range reps {
		out[i] = r.Iter
	}
	return out
}

func sameInts(a, b []int) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}
