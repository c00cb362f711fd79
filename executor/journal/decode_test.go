package journal

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// agree fails t when decodeFast takes a line and reads it otherwise than encoding/json does,
// or takes a line encoding/json refuses.
func agree(t *testing.T, line []byte) {
	t.Helper()
	var want Event
	jsonErr := json.Unmarshal(line, &want)
	var got Event
	var key string
	if !decodeFast(line, &got, &key) {
		return
	}
	if jsonErr != nil {
		t.Errorf("%s: decodeFast took it, encoding/json refuses it: %v", line, jsonErr)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n fast %+v\n json %+v", line, got, want)
	}
}

func TestDecodeFastAgrees(t *testing.T) {
	at := time.Date(2000, 1, 1, 1, 8, 17, 509661023, time.UTC)
	m := 0.8988985
	neg := -1.5e-7
	events := []Event{
		{Ev: EvStart, At: at, RunID: "r20000101-000000-5c2559bd"},
		{Ev: EvTrial, At: at, Bracket: 2, Trial: "b2-t0001", Params: spec.Config{"lr": 0.01}},
		{Ev: EvLaunch, At: at, Stage: 1, Trial: "b0-t0005", Try: 2, GPUs: 4, Nodes: []string{"v0002", "v0003"}},
		{Ev: EvReport, At: at, Stage: 3, Trial: "b0-t0005", Iter: 27, Metrics: map[string]float64{"val_accuracy": m, "loss": neg, "zero": 0, "big": 1e300}},
		{Ev: EvDone, At: at, Stage: 5, Trial: "b0-t0005", GPUs: 1, Iter: 364, Metrics: map[string]float64{"val_accuracy": m}, Metric: &m,
			Seconds: 970.633926849, Began: at.Add(-time.Hour), Exited: at},
		{Ev: EvDone, At: at, Metric: &neg, Metrics: map[string]float64{}},
		{Ev: EvFail, At: at, Trial: "b0-t0001", Error: "exit status 1: \"quoted\"\n\tline two", GaveUp: true, Interrupted: true, NotStarted: true},
		{Ev: EvSync, At: at, Stage: 6, Keep: []string{"b0-t0000", "b0-t0004"}},
		{Ev: EvSync, At: at, Keep: []string{}},
		{Ev: EvNodeUp, At: at, Node: &cloud.Node{ID: "v1", GPUs: 4, RunningAt: at, Market: cloud.Spot}, Tier: "on-demand"},
		{Ev: EvNodeOff, At: at, Nodes: []string{"v1"}, Cause: "released"},
		{Ev: EvInterrupt, At: at, Nodes: []string{"v1"}, Draining: true, Error: "notice"},
		{Ev: EvRequest, At: at, Count: 113, Token: "b0-r2", Market: "on-demand"},
		{Ev: EvReplan, At: at, Stage: 3, Plan: []sim.StageAlloc{{GPUs: 8, Nodes: 2}}, Reason: "saves 10%", GivesWay: true,
			Before: &planner.Forecast{JCT: 1}, After: &planner.Forecast{Cost: 2}},
		{Ev: EvStop, At: at, Error: "paused: disk full", Cause: "paused", Fault: "disk-full", Where: "/tmp/é"},
		{Ev: EvSpec, At: at, Spec: "abc"},
		{Ev: EvPhase, At: at.In(time.FixedZone("", 2*3600)), Phase: 3, Bracket: -1},
		{Ev: "unknown-kind", At: at, Trial: "ünïcode ✓"},
	}
	for _, e := range events {
		line, err := encodeRecord(e)
		if err != nil {
			t.Fatal(err)
		}
		line = line[:len(line)-1]
		agree(t, line)
		if got, reason := decodeRecord(line, new(string)); reason != "" || got.Ev != e.Ev || !got.At.Equal(e.At) {
			t.Errorf("%s: decoded %v at %v (%s)", line, got.Ev, got.At, reason)
		}
	}
	for _, line := range []string{
		`{"ev":"report","iter":01}`, `{"ev":"report","iter":1.5}`, `{"ev":"report","iter":-0}`, `{"ev":"report","iter":+1}`,
		`{"ev":"report","seconds":.5}`, `{"ev":"report","seconds":1E5}`, `{"ev":"report","seconds":1e400}`, `{"ev":"report","seconds":-}`,
		`{"ev":"report","EV":"done"}`, `{"ev":"report","metric":null}`, `{"ev": "report"}`, `{"ev":"report"} `, `{"ev":"report"}x`,
		`{"ev":"report","metrics":{"a":1,"a":2}}`, `{"ev":"report","metrics":{"a":"1"}}`, `{"ev":"report","nodes":["a",]}`,
		`{"ev":"report","at":"2000-01-01T00:00:00+02:00"}`, `{"ev":"report","at":"2000-01-01"}`, `{"ev":"r\u00e9port"}`,
		`{"ev":"report","trial":"a` + "\x01" + `"}`, `{"ev":"report","gave_up":true,"gave_up":false}`, `{"ev":"report","gave_up":tru}`,
		`{"at":"2000-02-30T00:00:00Z"}`, `{"at":"2000-01-01T24:00:00Z"}`, `{"at":"2000-01-01T00:00:00.1234567891Z"}`,
		`{"at":"2000-01-01T00:00:00.Z"}`, `{"at":"2000-01-01T00:00:60Z"}`, `{"at":"2000-01-01T00:00:00.5Z"}`, `{"at":"-200-01-01T00:00:00Z"}`,
		`{"at":"2000-01-01T00:00:00.000000001Z"}`, `{"at":"2000-01-01t00:00:00Z"}`, `{"at":"2024-02-29T23:59:59.999999999Z"}`,
		`{}`, `{"ev":"report",}`, `{"ev":"report","iter":99999999999999999999}`, `{"ev":"report","trial":"b0","trial":"b1"}`,
	} {
		agree(t, []byte(line))
	}
}

// FuzzDecodeFast holds decodeFast to encoding/json on any line.
func FuzzDecodeFast(f *testing.F) {
	f.Add([]byte(`{"crc":"0","ev":"report","at":"2000-01-01T00:00:03.967184764Z","trial":"b0-t0002","iter":1,"metrics":{"val_accuracy":0.16}}`))
	f.Add([]byte(`{"ev":"done","stage":1,"gpus":1,"metric":-1e-3,"seconds":3.9,"began":"2000-01-01T00:00:00Z","keep":["a"],"gave_up":true}`))
	f.Fuzz(func(t *testing.T, line []byte) { agree(t, line) })
}
