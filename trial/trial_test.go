package trial

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTransitions(t *testing.T) {
	for _, tc := range []struct {
		from State
		ev   Event
		to   State
		ok   bool
	}{
		{Pending, Launch, Running, true},
		{Running, Reached, Paused, true},
		{Paused, Promote, Promoted, true},
		{Promoted, Launch, Running, true},
		{Paused, Cut, Stopped, true},
		{Running, Crashed, Pending, true},
		{Running, Interrupted, Pending, true},
		{Running, GaveUp, Failed, true},
		{Pending, Cut, Stopped, true},
		{Promoted, Cut, Stopped, true},
		{Pending, Reached, Pending, false},
		{Paused, Launch, Paused, false},
		{Stopped, Launch, Stopped, false},
		{Failed, Launch, Failed, false},
		{Running, Promote, Running, false},
		{Running, Cut, Running, false},
	} {
		got, err := Transition(tc.from, tc.ev)
		if got != tc.to || (err == nil) != tc.ok {
			t.Errorf("%s --%s--> %s (err %v), want %s ok=%v", tc.from, tc.ev, got, err, tc.to, tc.ok)
		}
	}
	// Every path ends: no event leaves a final state.
	for _, s := range []State{Stopped, Failed} {
		for _, e := range []Event{Launch, Reached, Crashed, GaveUp, Interrupted, Promote, Cut} {
			if _, err := Transition(s, e); err == nil || !s.Done() {
				t.Errorf("%s accepts %s", s, e)
			}
		}
	}
}

func TestParseReport(t *testing.T) {
	r, err := ParseReport(`@rb {"iter": 4, "val_accuracy": 0.91, "loss": 1e-3}` + "\n")
	if err != nil || r.Iter != 4 || r.Metrics["val_accuracy"] != 0.91 || r.Metrics["loss"] != 0.001 || len(r.Metrics) != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := ParseReport("epoch 4 done"); !errors.Is(err, ErrNotReport) {
		t.Fatalf("plain output: %v", err)
	}
	for _, bad := range []string{
		`@rb not json`, `@rb {"val": 1}`, `@rb {"iter": 1.5}`, `@rb {"iter": -1}`, `@rb {"iter": 1, "acc": "high"}`,
		`@rb {"iter": 1} {"iter": 2}`, `@rb [1,2]`, `@rb {"iter": 1, "acc": null}`, `@rb {"iter": 99999999999}`,
	} {
		if _, err := ParseReport(bad); err == nil || errors.Is(err, ErrNotReport) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
	line := FormatReport(7, map[string]float64{"b": 2, "a": 0.5})
	if line != `@rb {"iter":7,"a":0.5,"b":2}` {
		t.Fatalf("format %q", line)
	}
	if r, err := ParseReport(line); err != nil || r.Iter != 7 || r.Metrics["b"] != 2 {
		t.Fatalf("round trip %+v %v", r, err)
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add(`@rb {"iter": 4, "val_accuracy": 0.91}`)
	f.Add(`@rb {"iter": 1e3}`)
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseReport(line)
		if err == nil && (!strings.HasPrefix(line, ReportPrefix) || r.Iter < 0) {
			t.Fatalf("accepted %q as %+v", line, r)
		}
	})
}

func TestEnvVars(t *testing.T) {
	vars, err := Env{TrialID: "t3", Experiment: "x", Params: map[string]any{"lr": 0.1}, StartIter: 1, TargetIter: 4,
		CheckpointDir: "/c", Rank: 1, WorldSize: 2, LocalRank: 1, MasterAddr: "10.0.0.1", MasterPort: 2900, GPUs: []int{2, 3}}.Vars()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(vars, " ")
	for _, want := range []string{"RB_TRIAL_ID=t3", `RB_PARAMS={"lr":0.1}`, "RB_START_ITER=1", "RB_TARGET_ITER=4", "RANK=1", "WORLD_SIZE=2",
		"LOCAL_RANK=1", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=2900", "CUDA_VISIBLE_DEVICES=2,3", "RB_GPUS=2,3", "RB_CHECKPOINT_DIR=/c"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in %s", want, got)
		}
	}
}

func TestStampReport(t *testing.T) {
	at := time.Unix(1700000000, 250000000)
	line := StampReport(`@rb {"iter": 3, "acc": 0.5}`, at)
	r, err := ParseReport(line)
	if err != nil || r.Iter != 3 || r.Metrics["acc"] != 0.5 || len(r.Metrics) != 1 || !r.At.Equal(at) {
		t.Fatalf("%q -> %+v %v", line, r, err)
	}
	if StampReport("plain output", at) != "plain output" || StampReport(line, at.Add(time.Hour)) != line {
		t.Fatal("stamped what it should have left alone")
	}
	if r, err := ParseReport(StampReport(`@rb {}`, at)); err == nil {
		t.Fatalf("a report without iter accepted: %+v", r)
	}
}
