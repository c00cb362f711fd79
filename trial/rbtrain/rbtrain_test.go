package rbtrain

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/trial"
)

// The helper reads exactly what the driver writes.
func TestParseWhatTheDriverWrites(t *testing.T) {
	vars, err := trial.Env{TrialID: "t1", Experiment: "e", Params: map[string]any{"lr": 0.5, "hidden": 64}, StartIter: 3,
		TargetIter: 9, CheckpointDir: t.TempDir(), Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: 4000, GPUs: []int{1}}.Vars()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	var out bytes.Buffer
	r, err := Parse(func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		LR     float64 `json:"lr"`
		Hidden int     `json:"hidden"`
	}
	if err := r.Params(&p); err != nil || p.LR != 0.5 || p.Hidden != 64 {
		t.Fatalf("params %+v %v", p, err)
	}
	if r.StartIter != 3 || r.TargetIter != 9 || r.WorldSize != 2 || r.MasterPort != 4000 || len(r.GPUs) != 1 || r.GPUs[0] != 1 {
		t.Fatalf("run %+v", r)
	}
	r.Report(9, map[string]float64{"acc": 0.8})
	if rep, err := trial.ParseReport(out.String()); err != nil || rep.Iter != 9 || rep.Metrics["acc"] != 0.8 {
		t.Fatalf("report %q: %v", out.String(), err)
	}
	if err := r.WriteCheckpoint("state.json", []byte(`{"iter":9}`)); err != nil {
		t.Fatal(err)
	}
	data, ok, err := r.ReadCheckpoint("state.json")
	if !ok || err != nil || string(data) != `{"iter":9}` {
		t.Fatalf("checkpoint %q %v %v", data, ok, err)
	}
	if _, ok, _ := r.ReadCheckpoint("missing"); ok {
		t.Fatal("missing checkpoint found")
	}
	if _, err := Parse(func(string) string { return "" }, &out); err == nil {
		t.Fatal("empty environment accepted")
	}
}
