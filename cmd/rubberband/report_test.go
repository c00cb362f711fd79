package main

import (
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// The realized schedule has a TRAIN bar per launch per node it used, in lanes that never overlap
// on a node at one time, and provisioning from the stage's start to the node's first launch.
func TestRealizedSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	n1, n2 := cloud.Node{ID: "n1", GPUs: 4}, cloud.Node{ID: "n2", GPUs: 4}
	events := []executor.Event{
		{Ev: executor.EvStart, At: at(0)},
		{Ev: executor.EvStage, At: at(0)},
		{Ev: executor.EvNodeUp, At: at(10), Node: &n1},
		{Ev: executor.EvNodeUp, At: at(10), Node: &n2},
		{Ev: executor.EvLaunch, At: at(15), Trial: "a", GPUs: 2, Nodes: []string{"n1"}},
		{Ev: executor.EvLaunch, At: at(15), Trial: "b", GPUs: 2, Nodes: []string{"n1"}},
		{Ev: executor.EvLaunch, At: at(16), Trial: "c", GPUs: 8, Nodes: []string{"n1", "n2"}},
		{Ev: executor.EvDone, At: at(50), Trial: "a"},
		{Ev: executor.EvFail, At: at(60), Trial: "b"},
		{Ev: executor.EvDone, At: at(70), Trial: "c"},
		{Ev: executor.EvSync, At: at(71)},
	}
	rows, bars, ends := realizedSchedule(events, 1, 4)
	trains, provisions := 0, 0
	lanes := map[string]bool{}
	for _, b := range bars {
		if b.Kind == "provision" {
			provisions++
			if b.Start != 0 || (b.End != 15 && b.End != 16) {
				t.Errorf("provision %+v", b)
			}
			continue
		}
		trains++
		key := func(lo float64) string { return string(rune('0'+b.Row)) + string(rune('0'+int(lo*4))) }
		if b.Start < 20 && b.Label != 2 { // a and b run together on n1: distinct lanes
			if lanes[key(b.Lo)] {
				t.Errorf("overlapping lanes: %+v", b)
			}
			lanes[key(b.Lo)] = true
		}
	}
	if rows != 2 || trains != 4 || provisions != 2 || len(ends) != 1 || ends[0] != 71 {
		t.Fatalf("rows %d, %d TRAIN bars, %d provisioning bars, ends %v", rows, trains, provisions, ends)
	}
}

// report --plots on a real run draws its four pictures.
func TestReportPlots(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	if _, errOut, code := rb(t, "run", "cmd/rubberband/testdata/synthetic.yaml", "--state", state, "--time-scale", "0.02"); code != 0 {
		t.Fatal(errOut)
	}
	plots := filepath.Join(t.TempDir(), "plots")
	if out, errOut, code := rb(t, "report", state, "--plots", plots); code != 0 || out == "" {
		t.Fatalf("report exit %d: %s", code, errOut)
	}
	for _, f := range []string{"curves.png", "gantt-planned.png", "gantt-realized.png", "cost.png"} {
		fh, err := os.Open(filepath.Join(plots, f))
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := image.DecodeConfig(fh)
		fh.Close()
		if err != nil || cfg.Width != 960 || cfg.Height < 576 {
			t.Errorf("%s: %dx%d %v", f, cfg.Width, cfg.Height, err)
		}
	}
}
