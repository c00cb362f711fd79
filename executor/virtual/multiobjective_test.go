package virtual_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A job of two objectives and a cost constraint, in virtual time: every sync keeps the top of
// its stage's results by pareto.Order (feasible first, then front, then crowding, ties by ID),
// recomputed here from the journal's metrics alone; each result carries cost_usd, the trial's
// metered dollars, and those grow with the trial's GPU-seconds; the reported front is the
// feasible non-dominated set at max_iters, and the best is on it. A replay of the journal
// gives the same front.
func TestMultiObjectiveSHAPromotesByDominance(t *testing.T) {
	exp, alloc, _ := plan(t, "testdata/multiobjective-sha.yaml")
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: path, RunID: "mo"})
	if err != nil || !out.Result.Finished {
		t.Fatalf("run: %v", err)
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		trial   string
		metrics map[string]float64
	}
	done := map[int][]result{}
	kept := map[int][]string{}
	costs := map[string][]float64{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvDone:
			done[e.Stage] = append(done[e.Stage], result{e.Trial, e.Metrics})
			costs[e.Trial] = append(costs[e.Trial], e.Metrics[spec.CostMetric])
		case journal.EvSync:
			kept[e.Stage] = e.Keep
		}
	}
	for trial, c := range costs {
		if c[0] <= 0 || !sort.Float64sAreSorted(c) {
			t.Errorf("trial %s: cost_usd by stage %v: metered, and growing as it trains", trial, c)
		}
	}
	stages := exp.Algorithm.Brackets()[0].Stages
	for k := 0; k < len(stages)-1; k++ {
		rs := done[k]
		slices.SortFunc(rs, func(a, b result) int { return strings.Compare(a.trial, b.trial) })
		points := make([]pareto.Point, len(rs))
		for i, r := range rs {
			losses, violation := search.Losses(exp, r.metrics)
			points[i] = pareto.Point{Losses: losses, Violation: violation}
		}
		var want []string
		for _, i := range pareto.Order(points)[:stages[k+1].Trials] {
			want = append(want, rs[i].trial)
		}
		if got := kept[k]; !slices.Equal(got, want) {
			t.Errorf("stage %d keeps %v; by dominance %v", k+1, got, want)
		}
	}
	front := out.Result.Pareto
	last := done[len(stages)-1]
	feasible := 0
	for _, r := range last {
		if r.metrics[spec.CostMetric] <= 0.09 {
			feasible++
		}
	}
	if len(front) < 2 || len(front) > feasible || feasible == len(last) {
		t.Fatalf("front %+v of %d results at max_iters, %d feasible: the trainer's objectives conflict, so more than one is on it, and the cap leaves some out", front, len(last), feasible)
	}
	for _, p := range front {
		mine, _ := search.Losses(exp, p.Metrics)
		if p.Metrics[spec.CostMetric] > 0.09 || p.Iter != stages[len(stages)-1].EndIter() {
			t.Errorf("front member %+v: infeasible, or not at max_iters", p)
		}
		for _, r := range last {
			other, v := search.Losses(exp, r.metrics)
			if v == 0 && pareto.Dominates(other, mine) {
				t.Errorf("front member %s is dominated by %s", p.Trial, r.trial)
			}
		}
	}
	if b := out.Result.Best; b == nil || b.Trial != front[0].Trial {
		t.Errorf("best %+v; the front's first %s", b, front[0].Trial)
	}
	again, err := runstate.Replay(runstate.Plan{Experiment: exp, Alloc: alloc}, events, events[len(events)-1].At)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(front []runstate.ParetoTrial) (out []string) {
		for _, p := range front {
			out = append(out, fmt.Sprint(p.Trial, p.Iter, p.Metrics))
		}
		return out
	}
	if !slices.Equal(ids(again.Pareto), ids(front)) {
		t.Errorf("replayed front %+v, the run's %+v", again.Pareto, front)
	}
}

// Planning does not depend on how results rank: the job planned with its two objectives and
// constraint, and with its first objective alone, gets the same plan, prediction and costs.
func TestMultiObjectivePlansAsOneObjective(t *testing.T) {
	src, err := os.ReadFile("testdata/multiobjective-sha.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	i, j := strings.Index(text, "objectives:"), strings.Index(text, "algorithm:")
	one := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(one, []byte(text[:i]+"objective: {metric: val_accuracy, mode: max}\n"+text[j:]), 0o644); err != nil {
		t.Fatal(err)
	}
	multi, multiAlloc, multiSim := plan(t, "testdata/multiobjective-sha.yaml")
	single, singleAlloc, singleSim := plan(t, one)
	if !multi.MultiObjective() || single.MultiObjective() {
		t.Fatal("the two specs are not what this test compares")
	}
	if !reflect.DeepEqual(multiAlloc, singleAlloc) {
		t.Fatalf("plans differ: %+v with several objectives, %+v with one", multiAlloc, singleAlloc)
	}
	if a, b := multiSim.Evaluate(multiAlloc), singleSim.Evaluate(singleAlloc); !reflect.DeepEqual(a, b) {
		t.Fatalf("predictions differ: %v against %v", a, b)
	}
}

// ASHA of 54 trials with the trial's own dollars as a second objective, in virtual time: every promotion
// passes the rule's audit (runstate.VerifyASHA feeds the journal's metrics to a fresh ladder as
// points), the winner is the rule's, and the front holds configurations at max_iters, cheaper
// ones less accurate.
func TestMultiObjectiveASHA(t *testing.T) {
	base := planned(t, "testdata/multiobjective-asha.yaml")
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	out, err := virtual.Run(context.Background(), with(base, path, nil, false))
	if err != nil || !out.Result.Finished || out.Result.Best == nil {
		t.Fatalf("run: %v", err)
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	best, err := runstate.VerifyASHA(base.Experiment, events)
	if err != nil || best != out.Result.Best.Trial {
		t.Fatalf("audit: %v; the rule's winner %s, the run's %s", err, best, out.Result.Best.Trial)
	}
	front := out.Result.Pareto
	if len(front) < 2 {
		t.Fatalf("front %+v: the trainer's accuracy and its cost conflict, more than one is on it", front)
	}
	for i := range front {
		if front[i].Iter != base.Experiment.Algorithm.ASHA.MaxIters {
			t.Errorf("front member %+v: not at max_iters", front[i])
		}
		if i == 0 {
			continue
		}
		a, b := front[i-1].Metrics, front[i].Metrics
		if (a["val_accuracy"] >= b["val_accuracy"]) != (a[spec.CostMetric] >= b[spec.CostMetric]) {
			t.Errorf("front members %v and %v: one dominates the other", a, b)
		}
	}
}

// With Hyperband's brackets, which end at stages of their own, the best of several objectives
// carries its own result: the objective it reported at its bracket's last stage.
func TestMultiObjectiveHyperbandBestIsItsOwnResult(t *testing.T) {
	src, err := os.ReadFile("testdata/multiobjective-sha.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "{stages: [{trials: 27, iters: 1}, {trials: 9, iters: 2}, {trials: 5, iters: 6}]}", "{hyperband: {min_iters: 1, max_iters: 9, eta: 3}}", 1)
	file := filepath.Join(t.TempDir(), "hb.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(text, "max: 0.09", "max: 10", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	exp, alloc, _ := plan(t, file)
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: path, RunID: "hb"})
	if err != nil || !out.Result.Finished || out.Result.Best == nil {
		t.Fatalf("run: %v", err)
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	best, last := out.Result.Best, -1.0
	for _, e := range events {
		if e.Ev == journal.EvDone && e.Trial == best.Trial {
			last = e.Metrics["val_accuracy"]
		}
	}
	if best.Metric != last {
		t.Fatalf("best %s with val_accuracy %v; its last result says %v", best.Trial, best.Metric, last)
	}
}
