package rundir

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/spec"
)

// job is a small job on single-GPU nodes whose elastic plan shrinks its cluster stage by stage;
// slow is its latencies 40% slower than its profile says (a profile that was wrong).
const job = `
name: job
deadline: 60s
seed: 1
objective: {metric: val_accuracy, mode: max}
algorithm: {stages: [{trials: 16, iters: 2}, {trials: 4, iters: 6}, {trials: 1, iters: 40}]}
search_space: {lr: {type: loguniform, min: 1.0e-4, max: 1.0e-1}}
trainer: {command: [rubberband, trainer, synthetic]}
cluster: {gpus_per_node: 1, price_per_hour: 3.06, max_nodes: %NODES%, billing: {minimum: 0s},
  scale_latency: {value: 3s}, init_latency: {value: 1s}}
profile:
  iter_latency: {1: {mean: %L1%, std: 0.1}, 2: {mean: %L2%, std: 0.05}, 4: {mean: %L4%, std: 0.03}, 8: {mean: %L8%, std: 0.02}}
  startup_latency: {value: 0.5s}
planner: {samples: 100, deadline_quantile: 0.5}
`

func jobSpec(t *testing.T, nodes int, slow float64, deadline string) *spec.Source {
	t.Helper()
	text := strings.NewReplacer("%NODES%", strconv.Itoa(nodes), "deadline: 60s", "deadline: "+deadline,
		"%L1%", strconv.FormatFloat(2*slow, 'f', 3, 64), "%L2%", strconv.FormatFloat(1.1*slow, 'f', 3, 64),
		"%L4%", strconv.FormatFloat(0.6*slow, 'f', 3, 64), "%L8%", strconv.FormatFloat(0.35*slow, 'f', 3, 64)).Replace(job)
	return &spec.Source{Path: "job.yaml", Data: []byte(text)}
}

func parse(t *testing.T, src *spec.Source) *spec.Experiment {
	t.Helper()
	exp, err := spec.Parse(src.Path, src.Data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// finishedRun plans the job src says, makes a run of it and runs it in virtual time in a world
// drawn from truth (nil: src), its plan kept; it returns its state, result and table.
func finishedRun(t *testing.T, src, truth *spec.Source) (*State, *runstate.Result, string) {
	t.Helper()
	exp := parse(t, src)
	var world *spec.Experiment
	if truth != nil {
		world = parse(t, truth)
	}
	rep, _, err := planner.PlanSpec(context.Background(), exp)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "job")
	if err := Mkdir(dir); err != nil {
		t.Fatal(err)
	}
	if err := Create(dir, RunFile{RunID: "r1", Backend: "virtual", TimeScale: 1, Samples: exp.Planner.Samples, Seed: exp.Seed}, src, exp, rep); err != nil {
		t.Fatal(err)
	}
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := virtual.Run(context.Background(), virtual.Config{Experiment: st.Exp, Truth: world, Alloc: st.Alloc, Journal: filepath.Join(dir, Journal), RunID: "r1"})
	if err != nil || !out.Result.Finished {
		t.Fatalf("%v", err)
	}
	var b strings.Builder
	WriteTable(&b, st, out.Result, "finished")
	return st, out.Result, b.String()
}

// quickstart is examples/quickstart.yaml (an elastic plan predicted to save a third against a
// static cluster of 3 nodes), its iterations slow times as long as its profile says.
func quickstart(t *testing.T, slow float64) *spec.Source {
	t.Helper()
	b, err := os.ReadFile("../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer()
	if slow != 1 {
		var pairs []string
		for _, m := range []float64{2.0, 1.4, 1.1, 1.0} {
			pairs = append(pairs, "mean: "+strconv.FormatFloat(m, 'f', 1, 64)+",", "mean: "+strconv.FormatFloat(m*slow, 'f', 3, 64)+",")
		}
		r = strings.NewReplacer(pairs...)
	}
	return &spec.Source{Path: "quickstart.yaml", Data: []byte(r.Replace(string(b)))}
}

var savedRe = regexp.MustCompile(`saves (-?[0-9.]+)%\n.*saved (-?[0-9.]+)%`)

// The saving compares like with like. On a plan whose cluster is the best static one (4 nodes
// throughout), a profile 40% wrong made the old line say "the elastic plan saved -36.8% (0.0%
// predicted)": it says there is no elastic saving. On an elastic plan with a profile as wrong,
// the realized cost is set against the static cluster re-costed on the latencies observed, so
// the realized saving stays near the predicted one (the old line, against the static
// prediction, called the profile's error a loss of elasticity).
func TestSavingComparesLikeWithLike(t *testing.T) {
	t.Run("static", func(t *testing.T) {
		_, _, table := finishedRun(t, jobSpec(t, 8, 1, "60s"), jobSpec(t, 8, 1.4, "60s"))
		if !strings.Contains(table, "static     the plan is the best static cluster (4 nodes): no elastic saving") || strings.Contains(table, "saved") {
			t.Fatalf("a static plan's saving:\n%s", table)
		}
	})
	t.Run("elastic", func(t *testing.T) {
		st, res, table := finishedRun(t, quickstart(t, 1), quickstart(t, 1.4))
		m := savedRe.FindStringSubmatch(table)
		if m == nil {
			t.Fatalf("no saving said:\n%s", table)
		}
		predicted, realized := atof(t, m[1]), atof(t, m[2])
		static := st.Plan.Static.Predicted.Cost.Mean
		old := 100 * (static - res.Realized.Cost) / static
		t.Logf("predicted %.1f%%, realized %.1f%% (against the static prediction: %.1f%%)\n%s", predicted, realized, old, table)
		if predicted <= 10 || realized < predicted-10 || realized > predicted+10 {
			t.Fatalf("predicted saving %.1f%%, realized %.1f%%: not like with like", predicted, realized)
		}
	})
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// A run not finished says its figures so far, and sets no share of them against the prediction
// of the whole (`status -w` said "realized … (-65.2% time, -41.9% cost)" midway).
func TestPartialFiguresSaySoFar(t *testing.T) {
	st, _, _ := finishedRun(t, jobSpec(t, 8, 1, "60s"), nil)
	events, err := journal.ReadJournal(filepath.Join(st.Dir, Journal))
	if err != nil {
		t.Fatal(err)
	}
	v, err := ViewOf(st, events[:len(events)/2], false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteTable(&b, st, v.Res, "running")
	out := b.String()
	if !strings.Contains(out, "so far     JCT") || strings.Contains(out, "realized   JCT") || strings.Contains(out, "% time") || strings.Contains(out, "saved") {
		t.Fatalf("a run midway:\n%s", out)
	}
	os.Remove(filepath.Join(st.Dir, Journal)) // nothing else to read
}
