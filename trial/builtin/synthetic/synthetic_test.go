package synthetic

import (
	"context"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
	"github.com/rubberband-hpo/rubberband/trial/rbtrain"
)

// RB_SYNTH_SLOWDOWN slows every iteration from RB_SYNTH_SLOWDOWN_FROM_ITER on, and nothing before;
// a factor of 1 or less, or none, changes nothing.
func TestSlowdownFromAnIteration(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want []float64 // iterations 1 to 4
	}{
		{Options{Slowdown: 1.3, SlowdownFromIter: 3}, []float64{1, 1, 1.3, 1.3}},
		{Options{Slowdown: 2}, []float64{2, 2, 2, 2}},
		{Options{Slowdown: 0.5, SlowdownFromIter: 2}, []float64{1, 1, 1, 1}},
		{Options{NodeSlowdown: 2}, []float64{2, 2, 2, 2}},                                     // a slow node, every iteration
		{Options{NodeSlowdown: 2, Slowdown: 1.5, SlowdownFromIter: 3}, []float64{2, 2, 3, 3}}, // both: they multiply
		{Options{}, []float64{1, 1, 1, 1}},
	} {
		for i, want := range tc.want {
			if got := tc.o.LatencyFactor(i + 1); got != want {
				t.Errorf("%+v: iteration %d slowed %v times, want %v", tc.o, i+1, got, want)
			}
		}
	}
}

// slowWriter takes its time over every write: a report's overhead on a loaded machine.
type slowWriter struct{ delay time.Duration }

func (w slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	return len(p), nil
}

// Iterations end on a schedule: a worker whose every report takes 15 ms (here a third of an
// iteration) still takes its draws' time, not the draws plus 15 ms an iteration. Wall time: a
// benchmark, not a test (on a loaded machine the schedule itself slips); it reports the time an
// iteration took and fails when that is stretched by more than half the report's 15 ms.
func BenchmarkOverheadDoesNotStretchIterations(b *testing.B) {
	exp, err := spec.Parse("s.yaml", []byte(`
name: s
deadline: 1h
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 2, min_iters: 1, max_iters: 2, eta: 2}}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [x]}
cluster: {gpus_per_node: 1, price_per_hour: 1, max_nodes: 1}
profile: {iter_latency: {1: {mean: 0.045}}}
`), nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		env := map[string]string{"RB_TRIAL_ID": "t", "RB_START_ITER": "0", "RB_TARGET_ITER": "20", "RANK": "0", "WORLD_SIZE": "1",
			"LOCAL_RANK": "0", "MASTER_PORT": "1", "RB_PARAMS": `{"x":0.5}`, "RB_CHECKPOINT_DIR": b.TempDir()}
		run, err := rbtrain.Parse(func(k string) string { return env[k] }, slowWriter{15 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := Main(context.Background(), run, Options{Spec: exp, TimeScale: 1}); err != nil {
			b.Fatal(err)
		}
		// 20 iterations of 45 ms: 0.9 s on schedule; 1.2 s when each report adds its 15 ms.
		perIter := time.Since(start).Seconds() / 20 * 1000
		b.ReportMetric(perIter, "ms/iter")
		if perIter > 45+7.5 {
			b.Fatalf("20 iterations of 45 ms took %.1f ms each: the reports' 15 ms stretch them", perIter)
		}
	}
}

// A benchmark's reports: one loss under the spec's metric, a benchmark of several objectives
// every loss under its own name, and without one the hashed curve; a metric the spec ranks by
// that neither gives is the Side metric of the first objective.
func TestReports(t *testing.T) {
	parse := func(objectives string) *spec.Experiment {
		src := "name: r\ndeadline: 1h\n" + objectives + "\nalgorithm: {sha: {trials: 9, min_iters: 1, max_iters: 9, eta: 3}}\n" +
			"search_space: {x1: {type: uniform, min: 0, max: 1}}\ntrainer: {command: [x]}\n" +
			"cluster: {gpus_per_node: 1, price_per_hour: 1}\nprofile: {iter_latency: {1: {mean: 1, std: 0}}}\n"
		exp, err := spec.Parse("r.yaml", []byte(src), nil)
		if err != nil {
			t.Fatal(err)
		}
		return exp
	}
	params := map[string]any{"x1": 0.3, "x2": 0.1, "x3": 0.2, "x4": 0.0, "x5": 0.5, "x6": 1.0}
	zdt, _ := objective.Lookup("zdt1")
	exp := parse("objectives: [{metric: f1, mode: min}, {metric: f2, mode: min}, {metric: size, mode: min}]")
	got := Reports(exp, &zdt, "f1", params)(3)
	want := zdt.Multi.Losses(params, 3, 9)
	if got["f1"] != want[0] || got["f2"] != want[1] || got["size"] != Side("size", params, want[0]) || len(got) != 3 {
		t.Fatalf("zdt1 reports %v; its losses at 3 of 9 are %v", got, want)
	}
	if got := Reports(parse("objective: {metric: score, mode: min}"), &zdt, "score", params)(9); got["score"] != zdt.Multi.Losses(params, 9, 9)[0] || len(got) != 3 {
		t.Fatalf("zdt1 under a spec ranking by score reports %v", got)
	}
	branin, _ := objective.Lookup("branin")
	one := parse("objective: {metric: loss, mode: min}")
	if got := Reports(one, &branin, "loss", params)(9); len(got) != 1 || got["loss"] != branin.Value(params, 9, 9) {
		t.Fatalf("branin reports %v", got)
	}
	if got := Reports(one, nil, "loss", params)(4); len(got) != 1 || got["loss"] != Curve(Quality(params), 4) {
		t.Fatalf("the hashed curve reports %v", got)
	}
}
