package virtual_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
)

// Progress is never silent for more than 10 s of the run's clock while a stage goes, whether or
// not a trial finishes: the paper's Table 2 job in virtual time, whose last stage trains one
// trial for 11 minutes (a line came only when a trial finished: 11 minutes of silence). The
// lines in between say what trains, and the iterations reported grow. The heartbeat decides
// nothing: the journal is the same with it as without it.
func TestProgressAtLeastEvery10s(t *testing.T) {
	exp, alloc, _ := plan(t, "../../examples/paper/table2-resnet101.yaml")
	run := func(every time.Duration) ([]runstate.Status, []byte) {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		var seen []runstate.Status
		cfg := virtual.Config{Experiment: exp, Alloc: alloc, Journal: path, RunID: "progress",
			Progress: func(s runstate.Status) { seen = append(seen, s) }, ProgressEvery: every}
		out, err := virtual.Run(context.Background(), cfg)
		if err != nil || !out.Result.Finished {
			t.Fatalf("%v", err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return seen, b
	}
	seen, journal := run(0) // the default
	if len(seen) < 2 {
		t.Fatalf("%d progress reports", len(seen))
	}
	// The run's first minutes are its nodes starting: reported too (before, the first line came
	// with the first trial done, after the whole SCALE and INIT).
	longest, at := seen[0].Elapsed, time.Duration(0)
	starting := 0
	for _, s := range seen {
		starting = max(starting, s.Starting)
	}
	if starting == 0 {
		t.Error("no report while the first stage's nodes started")
	}
	lastStage, grew := seen[len(seen)-1].Stage, false
	for i := 1; i < len(seen); i++ {
		if gap := seen[i].Elapsed - seen[i-1].Elapsed; gap > longest {
			longest, at = gap, seen[i-1].Elapsed
		}
		if p, s := seen[i-1], seen[i]; s.Stage == lastStage && p.Stage == lastStage && s.Done == 0 {
			if s.Running != 1 || s.ItersTotal != 37 || s.Iters < p.Iters {
				t.Fatalf("the last stage's heartbeat: %+v after %+v", s, p)
			}
			grew = grew || s.Iters > p.Iters
		}
	}
	t.Logf("%d progress reports; the longest silence %s, after %s", len(seen), longest, at)
	if longest > executor.DefaultProgressEvery || !grew {
		t.Fatalf("silent for %s after %s of the run (iterations grew in the last stage: %v)", longest, at, grew)
	}
	_, without := run(-1)
	if !bytes.Equal(journal, without) {
		t.Fatal("the heartbeat changed the journal")
	}
}
