package profiler_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/profiler"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Write gives the profile file a spec reads back: the same latencies per GPU count, the
// start-ups as an empirical distribution, the node start-up as a comment only.
func TestWriteReadsBack(t *testing.T) {
	prof := &profiler.Profile{Points: []profiler.Point{{GPUs: 1, Mean: 0.5, Std: 0.01, Startup: 1.25}, {GPUs: 4, Mean: 0.15, Std: 0.002, Startup: 2}},
		NodeStart: []float64{12.3456}}
	var b strings.Builder
	if err := prof.Write(&b, "measured by hand"); err != nil {
		t.Fatal(err)
	}
	want := `notes: measured by hand
iter_latency:
  1: {mean: 0.5, std: 0.01}
  4: {mean: 0.15, std: 0.002}
startup_latency: {dist: empirical, samples: [1.250, 2.000]}
# node start-up measured (request to ready): [12.346] s; set cluster.scale_latency and init_latency to match
`
	if b.String() != want {
		t.Fatalf("wrote\n%s\nwant\n%s", b.String(), want)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "profile.yaml"), []byte(b.String()), 0o644)
	specFile := filepath.Join(dir, "spec.yaml")
	os.WriteFile(specFile, []byte("name: p\nobjective: {metric: m}\nalgorithm: {stages: [{trials: 1, iters: 1}]}\n"+
		"cluster: {gpus_per_node: 4, price_per_hour: 1}\nprofile: {file: profile.yaml}\n"), 0o644)
	exp, err := spec.Load(specFile)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Profile.IterLatency[4].Mean != 0.15 || exp.Profile.IterLatency[1].Std != 0.01 || len(exp.Profile.StartupLatency.Samples) != 2 ||
		float64(exp.Profile.StartupLatency.Samples[0]) != 1.25 {
		t.Fatalf("read back %+v", exp.Profile)
	}
}
