package virtual_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// scaleJob is issue 39's job (testdata/scale-sha.yaml) at n trials, its sampler's (sampler:
// random or tpe), planned by greedy.
func scaleJob(tb testing.TB, n int, sampler string) virtual.Config {
	tb.Helper()
	data, err := os.ReadFile("testdata/scale-sha.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	text := strings.Replace(string(data), "trials: 4096", "trials: "+strconv.Itoa(n), 1) + "sampler: {name: " + sampler + "}\n"
	exp, err := spec.Parse("scale-sha.yaml", []byte(text), func(rel string) ([]byte, error) {
		return os.ReadFile(filepath.Join("testdata", rel))
	})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := sim.For(exp)
	if err != nil {
		tb.Fatal(err)
	}
	_, res, err := planner.Plan(context.Background(), exp, s, nil)
	if err != nil || res.Best.Alloc == nil {
		tb.Fatalf("plan %d trials: %v", n, err)
	}
	return virtual.Config{Experiment: exp, Alloc: res.Best.Alloc}
}

// runScale runs the job of n trials whole in virtual time as `rubberband run --backend virtual`
// does (re-planning at syncs, a progress line per stage event), and returns its wall time and
// the events (timers fired) it took.
func runScale(b *testing.B, n int, sampler string) (time.Duration, int) {
	b.Helper()
	cfg := scaleJob(b, n, sampler)
	cfg.Journal = filepath.Join(b.TempDir(), "journal.jsonl")
	cfg.RunID = "scale"
	cfg.Replan = true
	var lines int
	cfg.Progress = func(runstate.Status) { lines++ }
	runtime.GC()
	start := time.Now()
	out, err := virtual.Run(context.Background(), cfg)
	wall := time.Since(start)
	if err != nil || !out.Result.Finished || out.Result.Best == nil {
		b.Fatalf("%d trials: %v", n, err)
	}
	return wall, out.Events
}

// BenchmarkRunScale runs issue 39's job whole in virtual time at each size, and fails when the
// wall time per trial grows by more than 1.5x from the smallest size to any larger one: the
// driver's cost per event must not grow with the job. RB_SCALE_SIZES (comma-separated) overrides
// the sizes: `RB_SCALE_SIZES=100000 go test -run '^$' -bench RunScale -benchtime 1x ./executor/virtual`.
func BenchmarkRunScale(b *testing.B) { benchScale(b, "random", []int{1024, 4096, 16384, 65536}) }

// BenchmarkRunScaleTPE is BenchmarkRunScale with the TPE sampler: each trial's configuration is
// drawn at its first launch from the results so far.
func BenchmarkRunScaleTPE(b *testing.B) { benchScale(b, "tpe", []int{1024, 4096, 16384}) }

func benchScale(b *testing.B, sampler string, sizes []int) {
	if env := os.Getenv("RB_SCALE_SIZES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("RB_SCALE_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	for range b.N {
		var first float64
		for i, n := range sizes {
			wall, events := runScale(b, n, sampler)
			perTrial := float64(wall.Microseconds()) / float64(n)
			var mem runtime.MemStats
			runtime.ReadMemStats(&mem)
			b.Logf("%6d trials: %7.2f s wall, %6.1f µs/trial, %8d events, %7.0f events/s, heap %d MB",
				n, wall.Seconds(), perTrial, events, float64(events)/wall.Seconds(), mem.HeapAlloc>>20)
			b.ReportMetric(perTrial, fmt.Sprintf("µs/trial@%d", n))
			if i == 0 {
				first = perTrial
			} else if perTrial > 1.5*first {
				b.Errorf("%d trials took %.1f µs per trial, %.1fx the %d-trial run's %.1f: the cost per event grows with the job",
					n, perTrial, perTrial/first, sizes[0], first)
			}
		}
	}
}

// BenchmarkDriverEvents runs 10,000 trials at once: issue 39's job (30,000 trials, 1 to 729
// iterations) on a static cluster of 2,500 four-GPU nodes, one GPU per trial, and reports the
// journal records the driver wrote per second of wall time (issue 39: at least 20,000 at
// 10,000 concurrent trials).
func BenchmarkDriverEvents(b *testing.B) {
	const trials, concurrent = 30_000, 10_000
	cfg := scaleJob(b, 1024, "random") // the planner's at a small size: only its experiment is kept
	data, err := os.ReadFile("testdata/scale-sha.yaml")
	if err != nil {
		b.Fatal(err)
	}
	text := strings.NewReplacer("trials: 4096", "trials: "+strconv.Itoa(trials), "max_nodes: 256", "max_nodes: 2500").Replace(string(data))
	exp, err := spec.Parse("scale-sha.yaml", []byte(text), func(rel string) ([]byte, error) {
		return os.ReadFile(filepath.Join("testdata", rel))
	})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Experiment = exp
	cfg.Alloc = sim.Alloc{nil}
	for _, st := range exp.Algorithm.Brackets()[0].Stages { // one GPU per trial, 10,000 at most
		gpus := min(st.Trials, concurrent)
		cfg.Alloc[0] = append(cfg.Alloc[0], sim.StageAlloc{GPUs: gpus, Nodes: (gpus + 3) / 4})
	}
	for range b.N {
		cfg.Journal = filepath.Join(b.TempDir(), "journal.jsonl")
		cfg.RunID = "events"
		runtime.GC()
		start := time.Now()
		out, err := virtual.Run(context.Background(), cfg)
		wall := time.Since(start)
		if err != nil || !out.Result.Finished {
			b.Fatalf("%v", err)
		}
		events, err := journal.ReadJournal(cfg.Journal)
		if err != nil {
			b.Fatal(err)
		}
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		perSec := float64(len(events)) / wall.Seconds()
		b.Logf("%d trials, %d at once: %d journal records in %.2f s: %.0f records/s, heap %d MB", trials, concurrent, len(events), wall.Seconds(), perSec, mem.HeapAlloc>>20)
		b.ReportMetric(perSec, "records/s")
		if perSec < 20_000 {
			b.Errorf("%.0f journal records per second at %d concurrent trials: under issue 39's 20,000", perSec, concurrent)
		}
	}
}
