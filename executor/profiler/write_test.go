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
// start-ups as an empirical distribution, the node start-up as comments only, each the value of
// its cluster field, which a spec reads as it is.
func TestWriteReadsBack(t *testing.T) {
	prof := &profiler.Profile{Points: []profiler.Point{{GPUs: 1, Mean: 0.5, Std: 0.01, Startup: 1.25}, {GPUs: 4, Mean: 0.15, Std: 0.002, Startup: 2}},
		NodeScale: []float64{12.3456, 11}, NodeInit: []float64{3.5, 4}}
	var b strings.Builder
	if err := prof.Write(&b, "measured by hand"); err != nil {
		t.Fatal(err)
	}
	want := `notes: measured by hand
iter_latency:
  1: {mean: 0.5, std: 0.01}
  4: {mean: 0.15, std: 0.002}
startup_latency: {dist: empirical, samples: [1.250, 2.000]}
# node start-up measured, for the cluster (the cost meter bills a node from running):
# cluster.scale_latency: {dist: empirical, samples: [12.346, 11.000]}  # request to running, not billed
# cluster.init_latency: {dist: empirical, samples: [3.500, 4.000]}  # running to ready for trials, billed
`
	if b.String() != want {
		t.Fatalf("wrote\n%s\nwant\n%s", b.String(), want)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "profile.yaml"), []byte(b.String()), 0o644)
	specFile := filepath.Join(dir, "spec.yaml")
	// The comments' values, pasted into the cluster.
	var cluster []string
	for _, l := range strings.Split(b.String(), "\n") {
		for _, field := range []string{profiler.ScaleLatencyField, profiler.InitLatencyField} {
			if rest, ok := strings.CutPrefix(l, "# "+field+": "); ok {
				value, _, _ := strings.Cut(rest, "  #")
				cluster = append(cluster, strings.TrimPrefix(field, "cluster.")+": "+value)
			}
		}
	}
	os.WriteFile(specFile, []byte("name: p\nobjective: {metric: m}\nalgorithm: {stages: [{trials: 1, iters: 1}]}\n"+
		"cluster: {gpus_per_node: 4, price_per_hour: 1, "+strings.Join(cluster, ", ")+"}\nprofile: {file: profile.yaml}\n"), 0o644)
	exp, err := spec.Load(specFile)
	if err != nil {
		t.Fatal(err)
	}
	if exp.Profile.IterLatency[4].Mean != 0.15 || exp.Profile.IterLatency[1].Std != 0.01 || len(exp.Profile.StartupLatency.Samples) != 2 ||
		float64(exp.Profile.StartupLatency.Samples[0]) != 1.25 {
		t.Fatalf("read back %+v", exp.Profile)
	}
	if sc, in := exp.Cluster.ScaleLatency.Samples, exp.Cluster.InitLatency.Samples; len(sc) != 2 || float64(sc[0]) != 12.346 || len(in) != 2 || float64(in[1]) != 4 {
		t.Fatalf("cluster read back: scale %+v, init %+v", exp.Cluster.ScaleLatency, exp.Cluster.InitLatency)
	}
}

// A measured launch overhead and first-stage lag are written as empirical distributions of the
// GPU counts' measurements, which a spec reads back into the profile.
func TestWriteOverheadAndLag(t *testing.T) {
	prof := &profiler.Profile{Points: []profiler.Point{{GPUs: 1, Mean: 0.5, Startup: 1.25, Overhead: 0.004, Lag: 0.75}, {GPUs: 2, Mean: 0.3, Startup: 1, Overhead: 0.006}}}
	var b strings.Builder
	if err := prof.Write(&b, "by hand"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "launch_overhead: {dist: empirical, samples: [0.004, 0.006]}\nfirst_stage_lag: {dist: empirical, samples: [0.750, 0.000]}\n") {
		t.Fatalf("wrote\n%s", b.String())
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "profile.yaml"), []byte(b.String()), 0o644)
	specFile := filepath.Join(dir, "spec.yaml")
	os.WriteFile(specFile, []byte("name: p\nobjective: {metric: m}\nalgorithm: {stages: [{trials: 1, iters: 1}]}\n"+
		"cluster: {gpus_per_node: 2, price_per_hour: 1}\nprofile: {file: profile.yaml}\n"), 0o644)
	exp, err := spec.Load(specFile)
	if err != nil {
		t.Fatal(err)
	}
	if o, l := exp.Profile.LaunchOverhead, exp.Profile.FirstStageLag; o.Kind != spec.DistEmpirical || len(o.Samples) != 2 || float64(o.Samples[1]) != 0.006 ||
		l.Kind != spec.DistEmpirical || float64(l.Samples[0]) != 0.75 {
		t.Fatalf("read back overhead %+v, lag %+v", o, l)
	}
}

// Every measured launch is written, GPU count after GPU count, not one summary per count: the
// profile's start-ups keep their spread.
func TestWriteEveryLaunch(t *testing.T) {
	prof := &profiler.Profile{Points: []profiler.Point{
		{GPUs: 1, Mean: 0.5, Startup: 1, Startups: []float64{0.9, 1, 2.5}, Overheads: []float64{0.01, 0.02, 0.03}, Lags: []float64{0.4, 0}},
		{GPUs: 2, Mean: 0.3, Startup: 1.1, Startups: []float64{1.1, 1.2}, Overheads: []float64{0.01, 0.01}, Lags: []float64{0.2}, Contention: 0.03, Queued: 4},
		{GPUs: 4, Mean: 0.2, Startup: 1.1, Contention: 0.01, Queued: 2}}}
	var b strings.Builder
	if err := prof.Write(&b, "by hand"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"startup_latency: {dist: empirical, samples: [0.900, 1.000, 2.500, 1.100, 1.200, 1.100]}\n",
		"launch_overhead: {dist: empirical, samples: [0.010, 0.020, 0.030, 0.010, 0.010, 0.000]}\n",
		"first_stage_lag: {dist: empirical, samples: [0.400, 0.000, 0.200, 0.000]}\n",
		"startup_contention: {2: 0.0300s, 4: 0.0100s}", // each count that measured it, not pooled
	} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("want %q in\n%s", want, b.String())
		}
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
	if c := exp.Profile.StartupContention; c.At(2) != 0.03 || c.At(4) != 0.01 || c.At(1) != 0.015 || c.At(3) != 0.02 {
		t.Fatalf("read back contention %+v: at 1, 2, 3, 4 GPUs %v %v %v %v", c, c.At(1), c.At(2), c.At(3), c.At(4))
	}
}
