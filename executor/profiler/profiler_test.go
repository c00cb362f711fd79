package profiler_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/profiler"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

func experiment() *spec.Experiment {
	return &spec.Experiment{Name: "prof",
		Trainer: spec.Trainer{Command: []string{"train", "--fast"}, Env: map[string]string{"DATA": "digits"}},
		Cluster: spec.Cluster{GPUsPerNode: 4},
		SearchSpace: map[string]spec.Param{
			"lr":     {Type: "loguniform", Min: 1e-4, Max: 1e-2},
			"hidden": {Type: "choice", Values: []any{64, 128, 256}},
			"layers": {Type: "int", Min: 1, Max: 4},
			"m":      {Type: "uniform", Min: 0.8, Max: 1.0},
		}}
}

// reports makes each launch report every iteration up to its target.
func reports(g gang.Gang, n int) fake.Behavior {
	var b fake.Behavior
	for i := 1; i <= g.Workers[0].Env.TargetIter; i++ {
		b.Reports = append(b.Reports, trial.Report{Iter: i, Metrics: map[string]float64{"score": 0.5}})
	}
	return b
}

// On a provider's nodes: whole nodes per GPU count, rented before and released after each
// measurement (and timed); as many gangs side by side as fit on a node, launched in rounds (a
// warm-up, then the measured ones); each gang the typical trial laid out as a run lays it out.
func TestRunOnAProvider(t *testing.T) {
	exp := experiment()
	rt := &fake.Runtime{Behave: reports}
	prov := &fake.Provider{GPUsPerNode: 4}
	var measured []int
	prof, err := profiler.Run(context.Background(), profiler.Config{Experiment: exp, Runtime: rt, Provider: prov,
		GPUs: []int{1, 2, 4, 8}, Iters: 3, TimeScale: 1, Rounds: 2, Measured: func(p profiler.Point) { measured = append(measured, p.GPUs) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(measured, []int{1, 2, 4, 8}) || len(prof.Points) != 4 || prof.Points[3].GPUs != 8 {
		t.Fatalf("measured %v, points %+v", measured, prof.Points)
	}
	if len(prof.NodeScale) != 5 || len(prof.NodeInit) != 5 || prov.Held() != 0 || !slices.Equal(prov.Created, []string{"n001", "n002", "n003", "n004", "n005"}) ||
		!slices.Equal(prov.Deleted, prov.Created) {
		t.Fatalf("node start %v + %v; created %v, deleted %v, %d held", prof.NodeScale, prof.NodeInit, prov.Created, prov.Deleted, prov.Held())
	}
	perCount := map[int]int{}
	ids := map[string]bool{}
	for _, g := range rt.Launches {
		perCount[len(g.Workers)]++
		if ids[g.Trial] {
			t.Errorf("trial ID %s launched twice", g.Trial)
		}
		ids[g.Trial] = true
	}
	if want := map[int]int{1: 12, 2: 6, 4: 3, 8: 3}; !reflect.DeepEqual(perCount, want) { // warm-up and 2 rounds
		t.Fatalf("launches by gang size %v, want %v", perCount, want)
	}
	wantParams := spec.Config{"lr": 1e-3, "hidden": 128, "layers": int64(2), "m": 0.9}
	last := rt.Launches[len(rt.Launches)-1] // the measured 8-GPU gang, over n004 and n005
	if !slices.Equal(last.Command, exp.Trainer.Command) || last.Env["DATA"] != "digits" {
		t.Fatalf("gang %+v", last)
	}
	for r, w := range last.Workers {
		e := w.Env
		if wantNode := []string{"n004", "n005"}[r/4]; w.Node.ID != wantNode || e.Rank != r || e.LocalRank != r%4 || !slices.Equal(e.GPUs, []int{r % 4}) ||
			e.WorldSize != 8 || e.TargetIter != 3 || e.StartIter != 0 || e.Experiment != "prof" || e.TrialID != last.Trial || e.MasterAddr != "127.0.0.1" {
			t.Errorf("worker %d: node %s, env %+v", r, w.Node.ID, e)
		}
		if math.Abs(e.Params["lr"].(float64)-1e-3) > 1e-15 || e.Params["hidden"] != wantParams["hidden"] || e.Params["layers"] != wantParams["layers"] || e.Params["m"] != wantParams["m"] {
			t.Errorf("worker %d params %v, want %v", r, e.Params, wantParams)
		}
	}
}

// Without a provider each GPU count runs on one virtual node of exactly that many GPUs: one gang
// per round, three measured rounds by default.
func TestRunOnAVirtualNode(t *testing.T) {
	rt := &fake.Runtime{Behave: reports}
	prof, err := profiler.Run(context.Background(), profiler.Config{Experiment: experiment(), Runtime: rt, GPUs: []int{2, 8}, Iters: 2, TimeScale: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Launches) != 8 || len(prof.NodeScale) != 0 || len(prof.NodeInit) != 0 { // 2 counts x (warm-up + 3 rounds)
		t.Fatalf("%d launches, node start %v + %v", len(rt.Launches), prof.NodeScale, prof.NodeInit)
	}
	for _, g := range rt.Launches {
		for _, w := range g.Workers {
			if w.Node.ID != "profile" || w.Node.GPUs != len(g.Workers) {
				t.Fatalf("worker on %+v in a gang of %d", w.Node, len(g.Workers))
			}
		}
	}
}

// Without a provider, the cold round launches FirstWave gangs at once, as a job's first wave
// does, as far as the cluster's GPUs go (max_nodes of gpus_per_node: 8 here): 5 gangs at 1 GPU, 2
// at 4; the measured rounds one each; then as many as the cold round once more, warm, for the
// contention.
func TestColdRoundIsAsWideAsTheFirstWave(t *testing.T) {
	exp := experiment()
	exp.Cluster.MaxNodes = 2
	rt := &fake.Runtime{Behave: reports}
	if _, err := profiler.Run(context.Background(), profiler.Config{Experiment: exp, Runtime: rt, GPUs: []int{1, 4}, Iters: 2, TimeScale: 1, Rounds: 1, FirstWave: 5}); err != nil {
		t.Fatal(err)
	}
	cold, contended := map[int]int{}, map[int]int{}
	for _, g := range rt.Launches {
		if strings.Contains(g.Trial, "warmup") {
			cold[len(g.Workers)]++
		}
		if strings.Contains(g.Trial, "contended") {
			contended[len(g.Workers)]++
		}
	}
	if want := map[int]int{1: 5, 4: 2}; len(rt.Launches) != 16 || !reflect.DeepEqual(cold, want) || !reflect.DeepEqual(contended, want) {
		t.Fatalf("%d launches, cold ones by gang size %v, contended %v, want %v each", len(rt.Launches), cold, contended, want)
	}
}

// A failing gang, in either round and whichever of the gangs side by side, a trainer that does
// not report each iteration and a provider that cannot rent fail the profile, naming the GPU
// count, and leave no node rented.
func TestRunFails(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		behave func(g gang.Gang, n int) fake.Behavior
		create func(call, n int) (int, error)
		want   string
	}{
		{"warm-up gang", func(g gang.Gang, n int) fake.Behavior {
			if strings.HasSuffix(g.Trial, "-warmup-1") {
				return fake.Behavior{Err: boom}
			}
			return reports(g, n)
		}, nil, "profile at 2 GPUs: boom"},
		{"measured gang", func(g gang.Gang, n int) fake.Behavior {
			if !strings.Contains(g.Trial, "warmup") {
				return fake.Behavior{Err: boom}
			}
			return reports(g, n)
		}, nil, "profile at 2 GPUs: boom"},
		{"one report", func(g gang.Gang, n int) fake.Behavior {
			return fake.Behavior{Reports: []trial.Report{{Iter: 2}}}
		}, nil, "profile at 2 GPUs: the trainer reported 1 time(s)"},
		{"partial create", reports, func(call, n int) (int, error) { return n - 1, boom }, "profile at 8 GPUs: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prov := &fake.Provider{GPUsPerNode: 4, CreateFault: tc.create}
			gpus := []int{2}
			if tc.create != nil {
				gpus = []int{8}
			}
			_, err := profiler.Run(context.Background(), profiler.Config{Experiment: experiment(), Runtime: &fake.Runtime{Behave: tc.behave},
				Provider: prov, GPUs: gpus, Iters: 2, TimeScale: 1})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if prov.Held() != 0 {
				t.Fatalf("%d node(s) left rented", prov.Held())
			}
		})
	}
	for _, cfg := range []profiler.Config{{Iters: 1, TimeScale: 1}, {Iters: 2, TimeScale: 0}} {
		cfg.Experiment, cfg.Runtime, cfg.GPUs = experiment(), &fake.Runtime{}, []int{1}
		if _, err := profiler.Run(context.Background(), cfg); err == nil {
			t.Errorf("iters %d, time scale %v: no error", cfg.Iters, cfg.TimeScale)
		}
	}
}

// One round slowed by something else on the machine does not skew the start-up the log gives (the
// median of the launches'), but it is kept among the launches the profile file gives: the
// slowest launch is what ends a stage.
func TestOneSlowRoundDoesNotSkewStartup(t *testing.T) {
	startup := func(slow bool) (float64, []float64) {
		rt := &fake.Runtime{Behave: func(g gang.Gang, n int) fake.Behavior {
			b := reports(g, n)
			b.Duration = 20 * time.Millisecond
			if slow && strings.Contains(g.Trial, "-r1-") {
				b.Duration = 600 * time.Millisecond
			}
			return b
		}}
		prof, err := profiler.Run(context.Background(), profiler.Config{Experiment: experiment(), Runtime: rt, GPUs: []int{2}, Iters: 2, TimeScale: 1})
		if err != nil {
			t.Fatal(err)
		}
		return prof.Points[0].Startup, prof.Points[0].Startups
	}
	quiet, quietAll := startup(false)
	disturbed, disturbedAll := startup(true)
	if disturbed > quiet+0.1 {
		t.Fatalf("start-up %.3f s with one slow round, %.3f s without", disturbed, quiet)
	}
	if len(quietAll) != 3 || len(disturbedAll) != 3 || slices.Max(disturbedAll) < slices.Max(quietAll)+0.4 {
		t.Fatalf("launches' start-ups %v with one slow round, %v without: the slow launch is not kept", disturbedAll, quietAll)
	}
}

// booting rents fake nodes that take scale to run (they bill from then: RunningAt) and init more
// until the provider hands them over, on a virtual clock.
type booting struct {
	*fake.Provider
	clk         clock.Clock
	scale, init time.Duration
}

func (b *booting) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	b.clk.Sleep(ctx, b.scale)
	nodes, err := b.Provider.Create(ctx, req)
	b.clk.Sleep(ctx, b.init)
	return nodes, err
}

// The node start-up is split where the bill starts, as the model splits SCALE (not billed) from
// INIT_INSTANCE (billed): request to running, then running to handed over, ready for trials. In
// virtual time, at time scale 1 and 2 (spec seconds are wall seconds over the scale).
func TestNodeStartSplitsWhereTheBillStarts(t *testing.T) {
	for _, scale := range []float64{1, 2} {
		t.Run(fmt.Sprint("time scale ", scale), func(t *testing.T) {
			s := clock.NewSim(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
			sec := func(x float64) time.Duration { return time.Duration(x * scale * float64(time.Second)) }
			rt := &fake.Runtime{Clock: s, Behave: func(g gang.Gang, n int) fake.Behavior {
				return fake.Behavior{Count: true, Duration: sec(3 + 1), Every: sec(1)} // 3 s of start-up, 1 s iterations
			}}
			prov := &booting{Provider: &fake.Provider{Clock: s, GPUsPerNode: 4}, clk: s, scale: sec(30), init: sec(12)}
			var prof *profiler.Profile
			err := s.Run(context.Background(), func(ctx context.Context) {
				var err error
				prof, err = profiler.Run(ctx, profiler.Config{Experiment: experiment(), Runtime: rt, Provider: prov, GPUs: []int{2, 8},
					Iters: 3, TimeScale: scale, Rounds: 2, Clock: s})
				if err != nil {
					t.Error(err)
				}
			})
			if err != nil || prof == nil {
				t.Fatalf("profile: %v", err)
			}
			near := func(xs []float64, want float64) bool {
				for _, x := range xs {
					if math.Abs(x-want) > 1e-6 {
						return false
					}
				}
				return true
			}
			// one node at 2 GPUs, two at 8
			if len(prof.NodeScale) != 3 || len(prof.NodeInit) != 3 || !near(prof.NodeScale, 30) || !near(prof.NodeInit, 12) {
				t.Fatalf("node start-up: scale %v, init %v; want 3 x 30 s and 3 x 12 s", prof.NodeScale, prof.NodeInit)
			}
			for _, pt := range prof.Points {
				if math.Abs(pt.Startup-3) > 1e-6 || math.Abs(pt.Mean-1) > 1e-6 {
					t.Errorf("%d GPUs: start-up %v, %v s per iteration; want 3, 1", pt.GPUs, pt.Startup, pt.Mean)
				}
			}
		})
	}
}
