package profiler_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/executor/profiler"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A shell trainer run as processes: 0.3 s of start-up, then an iteration every 0.1 s, measured at
// half time scale (so 0.2 s per iteration and at least 0.6 s of start-up in spec seconds). The
// bounds leave room for a busy machine.
func TestRunTimesAShellTrainer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes for a few seconds")
	}
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	rt := &process.Runtime{Store: store, WorkDir: filepath.Join(dir, "work"), LogDir: filepath.Join(dir, "logs")}
	script := `sleep 0.3; i=1; while [ $i -le "$RB_TARGET_ITER" ]; do sleep 0.1; echo "@rb {\"iter\": $i}"; i=$((i+1)); done`
	exp := &spec.Experiment{Name: "shell", Trainer: spec.Trainer{Command: []string{"sh", "-c", script}}, Cluster: spec.Cluster{GPUsPerNode: 2}}
	prof, err := profiler.Run(context.Background(), profiler.Config{Experiment: exp, Runtime: rt, GPUs: []int{1, 2}, Iters: 5, TimeScale: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prof.Points {
		t.Logf("%d GPU(s): %.3f s per iteration (std %.3f), start-up %.3f s", p.GPUs, p.Mean, p.Std, p.Startup)
		if p.Mean < 0.18 || p.Mean > 0.4 || p.Std > 0.2 || p.Startup < 0.5 || p.Startup > 3 {
			t.Errorf("%d GPU(s): %.3f s per iteration (std %.3f), start-up %.3f s; want about 0.2 and 0.6", p.GPUs, p.Mean, p.Std, p.Startup)
		}
	}
}
