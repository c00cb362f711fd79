package executor_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// shaSpec is a small SHA job for the fakes: 8 trials, 3 stages, 2 GPUs per node.
const shaSpec = `
name: unit
deadline: 1h
seed: 3
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 4, eta: 2}}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [train]}
cluster:
  gpus_per_node: 2
  price_per_hour: 3.6
  scale_latency: {value: 0s}
  init_latency: {value: 0s}
  max_nodes: 4
profile:
  iter_latency: {1: {mean: 1}}
`

func experiment(t testing.TB, text string) *spec.Experiment {
	t.Helper()
	exp, err := spec.Parse("unit.yaml", []byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// elastic gives every stage one GPU per trial (at most 8), as nodes of the spec's size.
func elastic(t testing.TB, exp *spec.Experiment) sim.Alloc {
	t.Helper()
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	var gpus [][]int
	for _, b := range exp.Algorithm.Brackets() {
		var g []int
		for _, st := range b.Stages {
			g = append(g, min(st.Trials, 8))
		}
		gpus = append(gpus, g)
	}
	return m.Elastic(gpus)
}

type harness struct {
	cfg      executor.Config
	provider *fake.Provider
	runtime  *fake.Runtime
	journal  string
	log      strings.Builder
}

func newHarness(t testing.TB, text string) *harness {
	t.Helper()
	exp := experiment(t, text)
	h := &harness{provider: &fake.Provider{GPUsPerNode: exp.Cluster.GPUsPerNode}, runtime: &fake.Runtime{},
		journal: filepath.Join(t.TempDir(), "journal.jsonl")}
	h.cfg = executor.Config{Experiment: exp, Alloc: elastic(t, exp), Provider: h.provider, Runtime: h.runtime, Log: &h.log}
	return h
}

// run runs (or resumes) the job on the harness's journal.
func (h *harness) run(t testing.TB, ctx context.Context) (*executor.Result, []executor.Event, error) {
	t.Helper()
	j, past, err := executor.OpenJournal(h.journal)
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.cfg
	cfg.Journal, cfg.Past = j, past
	res, runErr := executor.Run(ctx, cfg)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := executor.ReadJournal(h.journal)
	if err != nil {
		t.Fatal(err)
	}
	return res, events, runErr
}

// A gang that exits 0 short of its target (a trainer that exits cleanly on SIGTERM) is not done:
// it is relaunched, and the stage's result is the one at the target.
func TestCleanExitShortOfTargetIsNotDone(t *testing.T) {
	h := newHarness(t, shaSpec)
	h.runtime.Behave = func(g executor.Gang, n int) fake.Behavior {
		target := g.Workers[0].Env.TargetIter
		if g.Trial == "b0-t0002" && n == 1 {
			return fake.Behavior{Reports: []trial.Report{{Iter: target - 1, Metrics: map[string]float64{"score": 5}}}}
		}
		return fake.Behavior{}
	}
	res, events, err := h.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished {
		t.Fatal("not finished")
	}
	var fails, dones int
	for _, e := range events {
		if e.Trial != "b0-t0002" || e.Stage != 0 {
			continue
		}
		switch e.Ev {
		case executor.EvFail:
			fails++
			if !strings.Contains(e.Error, "short of the target") {
				t.Errorf("fail event %q", e.Error)
			}
		case executor.EvDone:
			dones++
			if e.Iter != 1 || *e.Metric == 5 {
				t.Errorf("done at iteration %d with %v: the partial result was recorded", e.Iter, *e.Metric)
			}
		}
	}
	if fails != 1 || dones != 1 || h.runtime.Tries("b0-t0002") < 2 {
		t.Fatalf("%d fails, %d dones, %d launches", fails, dones, h.runtime.Tries("b0-t0002"))
	}
}
