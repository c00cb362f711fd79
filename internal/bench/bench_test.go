package bench

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
)

// A seed's run is the same run every time; its regret is never below 0 and it spends what the
// job trains; the samplers search differently.
func TestTrajectories(t *testing.T) {
	c := Case{Objective: "branin", Algorithm: "hyperband", Rounds: 2}
	p, err := Prepare(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	run := func(sampler string, seed int) Trajectory {
		tr, err := p.Run(context.Background(), sampler, seed, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := run("tpe", 3), run("tpe", 3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one seed, two trajectories")
	}
	if last := a.Points[len(a.Points)-1]; last.Iters != float64(p.Iters) || !(last.Dollars > 0) {
		t.Fatalf("the run spent %v iterations ($%v); the job trains %d", last.Iters, last.Dollars, p.Iters)
	}
	for _, pt := range a.Points {
		if pt.Regret < -1e-9 || math.IsNaN(pt.Regret) {
			t.Fatalf("regret %v", pt.Regret)
		}
	}
	if r := run("random", 3); reflect.DeepEqual(r.Points, a.Points) {
		t.Fatal("random and tpe searched alike")
	}
	sums := Summarize([]Trajectory{a, run("tpe", 4)}, Budgets(float64(p.Iters), 4))
	if len(sums) != 1 || sums[0].Runs != 2 || len(sums[0].P50) != 4 || sums[0].P25[3] > sums[0].P75[3] {
		t.Fatalf("summary %+v", sums)
	}
}

// Quartiles interpolate, and a run with no result yet counts as the worst.
func TestQuartiles(t *testing.T) {
	if q := quartiles([]float64{4, 1, 3, 2, 5}); q != [3]float64{2, 3, 4} {
		t.Fatalf("%v", q)
	}
	if q := quartiles([]float64{3, 1, math.Inf(1), 2}); q[0] != 1.75 || q[1] != 2.5 || !math.IsInf(q[2], 1) {
		t.Fatalf("%v", q)
	}
}

// Runs in parallel come back as the same runs, one after another, would: in sampler, then seed,
// order. The real benchmark, digits, runs through the same path (its network trained once per
// configuration, shared by the virtual trainers and the regret).
func TestRunAllIsRunInOrder(t *testing.T) {
	c := Case{Objective: "branin", Algorithm: "sha"}
	p, trs, err := RunAll(context.Background(), c, []string{"random", "tpe"}, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(trs) != 4 {
		t.Fatalf("%d trajectories", len(trs))
	}
	for i, tr := range trs {
		want, err := p.Run(context.Background(), []string{"random", "tpe"}[i/2], i%2, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tr, want) {
			t.Fatalf("trajectory %d is %s seed %d; want %s seed %d", i, tr.Sampler, tr.Seed, want.Sampler, want.Seed)
		}
	}
	_, digits, err := RunAll(context.Background(), Case{Objective: "digits", Algorithm: "sha"}, []string{"random"}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if final := digits[0].Final(); !(final > 0.01 && final < 0.5) {
		t.Fatalf("digits: the best of 81 configurations ends at validation loss %v", final)
	}
}

// ServeObjective answers what the objective itself answers, says what is wrong with a bad
// request and goes on, and stops at a line longer than it reads.
func TestServeObjective(t *testing.T) {
	o, _ := objective.Lookup("branin")
	in := `{"params": {"x1": 3.14159, "x2": 2.275}, "iter": 9, "max_iter": 27}
not json
{"params": {"x1": 3.14159, "x2": 2.275}, "final": true}
{"params": {"x1": 1, "x2": 1}, "iter": 0, "max_iter": 27}
`
	var out strings.Builder
	if err := ServeObjective(context.Background(), o, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	var got []Reply
	dec := json.NewDecoder(strings.NewReader(out.String()))
	for dec.More() {
		var r Reply
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	c := spec.Config{"x1": 3.14159, "x2": 2.275}
	if len(got) != 4 || got[0].Value != o.Value(c, 9, 27) || got[0].Error != "" || got[1].Error == "" ||
		got[2].Value != o.Final(c) || !strings.Contains(got[3].Error, "iter 0") {
		t.Fatalf("replies %+v", got)
	}
	huge := `{"params": {"x1": "` + strings.Repeat("9", maxRequest) + `"}}` + "\n"
	if err := ServeObjective(context.Background(), o, strings.NewReader(huge), io.Discard); err == nil {
		t.Fatal("a line over the limit was read")
	}
}

// A sampler's options stay with it; names are trimmed.
func TestSplitSamplers(t *testing.T) {
	got := SplitSamplers("random, sobol,tpe, random_fraction: 0.1, candidates: 8,tpe")
	want := []string{"random", "sobol", "tpe, random_fraction: 0.1, candidates: 8", "tpe"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q", got)
	}
}

// A benchmark of several objectives is searched as one: its job ranks by every loss, each
// trainer reports them all, and the run's hypervolume regret is never below 0, falls as the run
// finds configurations at the top budget, and is the same run every time.
func TestMultiObjectiveTrajectories(t *testing.T) {
	for _, name := range objective.MultiFunctions() {
		c := Case{Objective: name, Algorithm: "hyperband", Rounds: 2}
		exp, err := parse(c, "tpe", 1)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := objective.Lookup(name)
		if got := exp.Metrics(); !exp.MultiObjective() || !reflect.DeepEqual(got, o.Multi.Metrics) {
			t.Fatalf("%s: the job ranks by %v, not the benchmark's %v", name, got, o.Multi.Metrics)
		}
		p, err := Prepare(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		a, err := p.Run(context.Background(), "tpe", 1, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := p.Run(context.Background(), "tpe", 1, t.TempDir())
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: one seed, two trajectories", name)
		}
		for _, pt := range a.Points {
			if pt.Regret < -1e-9 || math.IsNaN(pt.Regret) || pt.Regret > o.Multi.MaxHypervolume {
				t.Fatalf("%s: hypervolume regret %v of %v", name, pt.Regret, o.Multi.MaxHypervolume)
			}
		}
		if first, last := a.Points[0].Regret, a.Final(); !(last < first) || last >= o.Multi.MaxHypervolume {
			t.Fatalf("%s: hypervolume regret from %v to %v", name, first, last)
		}
	}
}

// Optuna's file of several samplers' runs gives each run its own sampler's name.
func TestLoadOptunaOfSeveralSamplers(t *testing.T) {
	path := t.TempDir() + "/o.json"
	if err := os.WriteFile(path, []byte(`{"objective": "zdt1", "sampler": "optuna", "budget_iters": 100, "runs": [
		{"seed": 0, "sampler": "optuna-motpe", "trajectory": [[27, 5], [54, 4]]},
		{"seed": 0, "sampler": "optuna-nsga2", "trajectory": [[27, 6]]},
		{"seed": 1, "trajectory": [[27, 7]]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	trajs, err := ReadOptuna(path, "zdt1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 3 || trajs[0].Sampler != "optuna-motpe" || trajs[1].Sampler != "optuna-nsga2" || trajs[2].Sampler != "optuna" || trajs[0].Final() != 4 {
		t.Fatalf("%+v", trajs)
	}
}
