package driver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// The progress line says what trains and how far the stage's iterations got; an ASHA run's line
// speaks of its rungs and their results (it said "stage 2/4: 4/27 trials done" of rung 2's four
// results among 27 trials). --log-format json keeps its keys and adds running and iters.
func TestProgressLine(t *testing.T) {
	line := func(json bool, s runstate.Status) string {
		var buf bytes.Buffer
		NewLog(&buf, json, nil, "r1").Progress(s, 100)
		return buf.String()
	}
	sha := runstate.Status{Bracket: "sha", Stage: 3, Stages: 4, Done: 0, Total: 1, Running: 1, Iters: 12, ItersTotal: 37,
		Elapsed: 445 * time.Second, Cost: 10.5}
	if got, want := line(false, sha), "[sha] stage 4/4: 0/1 trials done · 1 running · 12/37 iterations · elapsed 7:25 · ETA 0.0s · $10.50 so far\n"; got != want {
		t.Errorf("SHA:\n got %q\nwant %q", got, want)
	}
	starting := runstate.Status{Bracket: "sha", Stage: 0, Stages: 4, Total: 27, ItersTotal: 27, Starting: 3, Elapsed: 40 * time.Second, Cost: 0.01}
	if got, want := line(false, starting), "[sha] stage 1/4: 0/27 trials done · waiting for 3 nodes to start · 0/27 iterations · elapsed 40.0s · ETA 1:00 · $0.0100 so far\n"; got != want {
		t.Errorf("nodes starting:\n got %q\nwant %q", got, want)
	}
	asha := runstate.Status{Bracket: "asha", Stage: 1, Stages: 4, Done: 4, Total: 9, Rungs: true, Running: 3, Iters: 120, Elapsed: 30 * time.Second, Cost: 0.25}
	got := line(false, asha)
	if want := "[asha] rung 2/4: 4 results (it holds 9 at the least) · 3 running · 120 iterations · elapsed 30.0s · ETA 1:10 · $0.2500 so far\n"; got != want {
		t.Errorf("ASHA:\n got %q\nwant %q", got, want)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(line(true, asha)), &rec); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"bracket", "stage", "stages", "done", "total", "failed", "elapsed_s", "eta_s", "cost", "running", "iters"} {
		if _, ok := rec[key]; !ok {
			t.Errorf("the JSON progress record has no %q: %v", key, rec)
		}
	}
	if strings.Contains(got, "trials done") {
		t.Errorf("an ASHA line speaks of trials done: %q", got)
	}
}
