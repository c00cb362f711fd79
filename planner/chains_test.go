package planner

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// greedyBoth plans exp with greedy on the simulator as it draws (stages by their slowest chain
// where they can be) and trial by trial; exactly is the trial-by-trial problem.
func greedyBoth(t *testing.T, exp *spec.Experiment, m *sim.Model) (fast, exact Result, exactly *Problem) {
	t.Helper()
	for i, by := range []bool{false, true} {
		s := sim.New(m, exp.Algorithm.Brackets(), exp.Planner.Samples, exp.Seed)
		if by {
			s.DrawTrialByTrial()
		}
		p, err := NewProblem(s, exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(p, spec.PlannerGreedy)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			fast = res
		} else {
			exact, exactly = res, p
		}
	}
	return fast, exact, exactly
}

// Drawing stages by their slowest chain chooses the plan drawing them trial by trial chooses:
// on the paper's examples, and on 30 random SHA and Hyperband jobs with normal iterations. Where
// two plans tie within the Monte Carlo error (costs 0.1% apart), either may come first: then the
// one chosen by chains, weighed trial by trial, meets the deadline and costs within 0.5% of the
// other.
func TestChainsChooseThePlanTrialsChoose(t *testing.T) {
	files, _ := filepath.Glob("../examples/paper/*.yaml")
	var jobs []string
	for _, f := range files {
		switch filepath.Base(f) {
		case "fig12-types.yaml", "fig12-init10s.yaml", "fig12-init100s.yaml": // under -race, a minute and
			// twice fig12-init1s's job again (its start-up latency aside)
		default:
			jobs = append(jobs, f)
		}
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(22, 22))
	for i := range 30 {
		alg := fmt.Sprintf("sha: {trials: %d, min_iters: %d, max_iters: %d, eta: %d}", 8+r.IntN(200), 1+r.IntN(3), 27+r.IntN(200), 2+r.IntN(3))
		if i%4 == 3 {
			alg = fmt.Sprintf("hyperband: {min_iters: 1, max_iters: %d, eta: 3}", 9+r.IntN(80))
		}
		mean := 0.5 + 5*r.Float64()
		src := fmt.Sprintf(`name: random%d
deadline: %dm
objective: {metric: acc}
algorithm: {%s}
cluster: {gpus_per_node: %d, price_per_hour: %.2f, max_nodes: %d, scale_latency: {value: 30s}, init_latency: {dist: lognormal, mean: 90, std: 30}}
profile: {iter_latency: {1: {dist: normal, mean: %.3f, std: %.3f}, 4: {dist: normal, mean: %.3f, std: %.3f}}}
planner: {samples: 50, deadline_quantile: 0.5}
`, i, 30+r.IntN(600), alg, []int{1, 4, 8}[r.IntN(3)], 1+10*r.Float64(), 4+r.IntN(60), mean, mean*0.05, mean/3.2, mean*0.02)
		f := filepath.Join(dir, fmt.Sprintf("random%d.yaml", i))
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, f)
	}
	same, planned := 0, 0
	for _, f := range jobs {
		exp, err := spec.Load(f)
		if err != nil || exp.Algorithm.IsASHA() {
			continue // the paper's ASHA example plans with PlanASHA
		}
		m, err := sim.NewModel(exp)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fast, exact, exactly := greedyBoth(t, exp, m)
		if d := time.Since(start); d > time.Second {
			t.Logf("%s: %s", f, d)
		}
		planned++
		if fast.Feasible != exact.Feasible {
			t.Errorf("%s: feasible %v by chains, %v trial by trial", f, fast.Feasible, exact.Feasible)
			continue
		}
		if reflect.DeepEqual(fast.Best.Alloc, exact.Best.Alloc) {
			same++
			continue
		}
		if c := exactly.evaluate(fast.Best.Alloc); c.Feasible == exact.Feasible && c.Cost <= exact.Best.Cost*1.005 {
			t.Logf("%s: a tie: by chains %v ($%.4f trial by trial), trial by trial %v ($%.4f)", f, fast.Best.Alloc, c.Cost, exact.Best.Alloc, exact.Best.Cost)
			continue
		}
		t.Errorf("%s: by chains %v ($%.4f), trial by trial %v ($%.4f)", f, fast.Best.Alloc, fast.Best.Cost, exact.Best.Alloc, exact.Best.Cost)
	}
	if planned < 38 { // 30 random jobs and the paper's
		t.Fatalf("only %d jobs planned", planned)
	}
	if same < planned*9/10 {
		t.Errorf("only %d of %d plans the same", same, planned)
	}
	t.Logf("%d of %d plans the same", same, planned)
}

// On Hyperband(1, 81, 3), whose five brackets share one cluster, the joint optimal planner
// searches its whole space, and greedy's plan costs within 1% of it, at a tight deadline (where
// the brackets compete for nodes) and a loose one.
func TestGreedyNearJointOptimalOnHyperband(t *testing.T) {
	exp, m := loadModel(t, "../examples/hyperband-81.yaml")
	for _, deadline := range []float64{700, 1200} {
		p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), 100, exp.Seed), deadline, 0.9)
		if err != nil {
			t.Fatal(err)
		}
		gr, op := Greedy(p), Optimal(p)
		if !op.Feasible || !op.Exact || !gr.Feasible {
			t.Fatalf("deadline %vs: optimal feasible %v exact %v, greedy feasible %v", deadline, op.Feasible, op.Exact, gr.Feasible)
		}
		if gr.Best.Cost > 1.01*op.Best.Cost || gr.Best.Cost < op.Best.Cost-1e-9 {
			t.Fatalf("deadline %vs: greedy $%.4f, optimal $%.4f", deadline, gr.Best.Cost, op.Best.Cost)
		}
	}
}
