package executor_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/sim"
)

// The realized schedule of a hand-made journal: provisioning from the stage's start to each
// node's first launch; a TRAIN span per launch per node, in GPU lanes that never overlap on a
// node at one time (a freed lane is reused); times in spec seconds; a stage end at each sync.
func TestRealizedSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) } // wall seconds
	n1, n2 := cloud.Node{ID: "n1", GPUs: 4}, cloud.Node{ID: "n2", GPUs: 4}
	events := []journal.Event{
		{Ev: journal.EvStart, At: at(0)},
		{Ev: journal.EvTrial, At: at(0), Trial: "a"}, {Ev: journal.EvTrial, At: at(0), Trial: "b"},
		{Ev: journal.EvTrial, At: at(0), Trial: "c"}, {Ev: journal.EvTrial, At: at(0), Trial: "d"},
		{Ev: journal.EvStage, At: at(2)},
		{Ev: journal.EvNodeUp, At: at(10), Node: &n1},
		{Ev: journal.EvNodeUp, At: at(10), Node: &n2},
		{Ev: journal.EvLaunch, At: at(15), Trial: "a", GPUs: 2, Nodes: []string{"n1"}},
		{Ev: journal.EvLaunch, At: at(15), Trial: "b", GPUs: 2, Nodes: []string{"n1"}},
		{Ev: journal.EvLaunch, At: at(16), Trial: "c", GPUs: 8, Nodes: []string{"n2", "n1"}},
		{Ev: journal.EvReport, At: at(40), Trial: "a"},
		{Ev: journal.EvDone, At: at(50), Trial: "a"},
		{Ev: journal.EvLaunch, At: at(52), Trial: "d", GPUs: 1, Nodes: []string{"n1"}},
		{Ev: journal.EvFail, At: at(60), Trial: "b"},
		{Ev: journal.EvDone, At: at(64), Trial: "d"},
		{Ev: journal.EvDone, At: at(70), Trial: "c"},
		{Ev: journal.EvDone, At: at(80), Trial: "nobody"}, // never launched: no span
		{Ev: journal.EvSync, At: at(72)},
		{Ev: journal.EvStage, At: at(72), Stage: 1},
		{Ev: journal.EvLaunch, At: at(74), Stage: 1, Trial: "a", GPUs: 4, Nodes: []string{"n1"}},
		{Ev: journal.EvDone, At: at(90), Stage: 1, Trial: "a"},
		{Ev: journal.EvSync, At: at(92), Stage: 1},
	}
	exp := experiment(t, shaSpec)
	snap, err := runstate.Fold(runstate.Plan{Experiment: exp, Alloc: elastic(t, exp), TimeScale: 2}, events)
	if err != nil {
		t.Fatal(err)
	}
	got := runstate.RealizedSchedule(snap, time.Time{}, 2, 4) // two wall seconds per spec second
	want := sim.Schedule{Rows: 2, GPUsPerNode: 4, StageEnds: []float64{36, 46}, Spans: []sim.Span{
		{Row: 0, Start: 1, End: 7.5, GPUs: 4, Provision: true},
		{Row: 1, Start: 1, End: 8, GPUs: 4, Provision: true},
		{Row: 0, Start: 7.5, End: 25, GPU: 0, GPUs: 2, Trial: 0}, // a
		{Row: 0, Start: 7.5, End: 30, GPU: 2, GPUs: 2, Trial: 1}, // b, beside a (spans in the order of results)
		{Row: 0, Start: 26, End: 32, GPU: 0, GPUs: 1, Trial: 3},  // d, in a's freed lane
		{Row: 1, Start: 8, End: 35, GPU: 0, GPUs: 4, Trial: 2},   // c on n2 ...
		{Row: 0, Start: 8, End: 35, GPU: 0, GPUs: 4, Trial: 2},   // ... and on n1, which is full: lane 0
		{Row: 0, Start: 37, End: 45, GPU: 0, GPUs: 4, Stage: 1, Trial: 0},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("schedule\n got %+v\nwant %+v", got, want)
	}
}

// A launch that ends the instant it starts (a launch failure in virtual time) takes no lane and
// draws nothing; its retry is drawn. Its end sorted before its start once made `report --plots`
// of a virtual run panic.
func TestRealizedScheduleZeroLengthLaunch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	n1 := cloud.Node{ID: "n1", GPUs: 4}
	events := []journal.Event{
		{Ev: journal.EvStart, At: at(0)},
		{Ev: journal.EvTrial, At: at(0), Trial: "a"},
		{Ev: journal.EvStage, At: at(0)},
		{Ev: journal.EvNodeUp, At: at(5), Node: &n1},
		{Ev: journal.EvLaunch, At: at(10), Trial: "a", GPUs: 4, Nodes: []string{"n1"}},
		{Ev: journal.EvFail, At: at(10), Trial: "a", Error: "launch failed"},
		{Ev: journal.EvLaunch, At: at(10), Trial: "a", Try: 1, GPUs: 4, Nodes: []string{"n1"}},
		{Ev: journal.EvDone, At: at(20), Trial: "a"},
		{Ev: journal.EvSync, At: at(20)},
	}
	exp := experiment(t, shaSpec)
	snap, err := runstate.Fold(runstate.Plan{Experiment: exp, Alloc: elastic(t, exp), TimeScale: 1}, events)
	if err != nil {
		t.Fatal(err)
	}
	got := runstate.RealizedSchedule(snap, time.Time{}, 1, 4)
	var train []sim.Span
	for _, sp := range got.Spans {
		if !sp.Provision {
			train = append(train, sp)
		}
	}
	if want := []sim.Span{{Row: 0, Start: 10, End: 20, GPU: 0, GPUs: 4}}; !reflect.DeepEqual(train, want) {
		t.Fatalf("spans %+v, want %+v", train, want)
	}
}

// A launch whose driver died ends at the resume (it journaled no result), freeing its lanes for
// the relaunch; a launch still running is drawn up to now, or left out without a now.
func TestRealizedScheduleAcrossResume(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	n1 := cloud.Node{ID: "n1", GPUs: 2}
	events := []journal.Event{
		{Ev: journal.EvStart, At: at(0)},
		{Ev: journal.EvTrial, At: at(0), Trial: "a"}, {Ev: journal.EvTrial, At: at(0), Trial: "b"},
		{Ev: journal.EvStage, At: at(0)},
		{Ev: journal.EvNodeUp, At: at(5), Node: &n1},
		{Ev: journal.EvLaunch, At: at(10), Trial: "a", GPUs: 1, Nodes: []string{"n1"}},
		{Ev: journal.EvResume, At: at(20)},
		{Ev: journal.EvLaunch, At: at(21), Trial: "b", GPUs: 1, Nodes: []string{"n1"}},
		{Ev: journal.EvLaunch, At: at(21), Trial: "a", GPUs: 1, Nodes: []string{"n1"}},
		{Ev: journal.EvDone, At: at(30), Trial: "b"},
	}
	exp := experiment(t, shaSpec)
	snap, err := runstate.Fold(runstate.Plan{Experiment: exp, Alloc: elastic(t, exp), TimeScale: 1}, events)
	if err != nil {
		t.Fatal(err)
	}
	if open := snap.Open(); len(open) != 1 || open[0].Trial != "a" || open[0].Try != 0 || snap.Launches[0].Outcome != runstate.LaunchOrphaned {
		t.Fatalf("open launches %+v, records %+v", open, snap.Launches)
	}
	got := runstate.RealizedSchedule(snap, at(40), 1, 2)
	want := []sim.Span{
		{Row: 0, Start: 0, End: 10, GPUs: 2, Provision: true},
		{Row: 0, Start: 10, End: 20, GPU: 0, GPUs: 1, Trial: 0}, // a, ended by the resume
		{Row: 0, Start: 21, End: 30, GPU: 0, GPUs: 1, Trial: 1}, // b, in a's freed lane
		{Row: 0, Start: 21, End: 40, GPU: 1, GPUs: 1, Trial: 0}, // a again, running: up to now
	}
	if !reflect.DeepEqual(got.Spans, want) {
		t.Fatalf("spans\n got %+v\nwant %+v", got.Spans, want)
	}
	if without := runstate.RealizedSchedule(snap, time.Time{}, 1, 2); len(without.Spans) != 3 {
		t.Fatalf("without a now, the running launch is drawn: %+v", without.Spans)
	}
}
