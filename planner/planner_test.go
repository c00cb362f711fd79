package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

func problem(t testing.TB, src string, deadline, q float64, samples int) *Problem {
	t.Helper()
	exp, m := parseModel(t, src)
	p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), samples, exp.Seed), deadline, q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// parseModel parses a spec and builds its model.
func parseModel(t testing.TB, src string) (*spec.Experiment, *sim.Model) {
	t.Helper()
	exp, err := spec.Parse("t.yaml", []byte(src), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	return exp, m
}

// randomJob draws a small random tuning job: SHA or explicit stages or Hyperband, a random
// scaling profile, cluster, latencies and billing.
func randomJob(r *rand.Rand) (src string, hyperband bool) {
	gpn := []int{1, 2, 4, 8}[r.IntN(4)]
	var alg string
	switch r.IntN(5) {
	case 0:
		alg = fmt.Sprintf("{stages: [{trials: %d, iters: %d}, {trials: %d, iters: %d}]}", 4+r.IntN(12), 1+r.IntN(4), 1+r.IntN(4), 2+r.IntN(10))
	case 1:
		alg = fmt.Sprintf("{hyperband: {min_iters: 1, max_iters: %d, eta: 3}}", 3+r.IntN(12))
		hyperband = true
	default:
		alg = fmt.Sprintf("{sha: {trials: %d, min_iters: %d, max_iters: %d, eta: %d}}", 2+r.IntN(40), 1+r.IntN(3), 10+r.IntN(60), 2+r.IntN(3))
	}
	t1 := 5 + r.Float64()*60
	prof := fmt.Sprintf("{iter_latency: {1: {mean: %.2f, std: %.2f}, 2: {mean: %.2f, std: %.2f}, 4: {mean: %.2f, std: %.2f}, 8: {mean: %.2f, std: %.2f}}, startup_latency: {value: %ds}}",
		t1, t1*r.Float64()*0.2, t1/1.9, t1*r.Float64()*0.1, t1/3.5, t1*r.Float64()*0.1, t1/(5+r.Float64()*2), t1*r.Float64()*0.1, r.IntN(20))
	billing := "per-instance"
	if r.IntN(4) == 0 {
		billing = "per-function"
	}
	cluster := fmt.Sprintf("{gpus_per_node: %d, price_per_hour: %.2f, max_nodes: %d, billing: {model: %s}, scale_latency: {dist: normal, mean: %ds, std: 3s}, init_latency: {value: %ds}}",
		gpn, 1+r.Float64()*20, 4+r.IntN(30), billing, r.IntN(60), r.IntN(60))
	return fmt.Sprintf("name: t\nseed: %d\nobjective: {metric: acc}\nalgorithm: %s\ncluster: %s\nprofile: %s\n", r.IntN(1000), alg, cluster, prof), hyperband
}

// Over many random jobs and deadlines: optimal <= greedy <= static in predicted cost (on the
// same draws), every feasible plan meets its deadline criterion and max_nodes, and greedy or
// optimal find a plan whenever static does.
func TestPlannerOrderingProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	jobs := 150
	if testing.Short() {
		jobs = 30
	}
	feasibleJobs := 0
	for j := 0; j < jobs; j++ {
		src, _ := randomJob(r)
		q := []float64{0.5, 0.9, 0.95}[r.IntN(3)]
		// Find a deadline between the fastest and a relaxed plan so that the question is interesting.
		probe := problem(t, src, 1e9, q, 30)
		fast := Static(probe)
		deadline := fast.Best.JCT * (0.6 + r.Float64()*2)
		p := problem(t, src, deadline, q, 30)
		st, gr, op := Static(p), Greedy(p), Optimal(p)
		for _, res := range []Result{st, gr, op} {
			if !res.Feasible {
				continue
			}
			out := p.Sim.Evaluate(res.Best.Alloc)
			if q := sim.Quantile(out.JCT, p.Quantile); q > deadline {
				t.Fatalf("job %d: %s plan's q%.2f JCT %.1f misses the deadline %.1f\n%s", j, res.Planner, p.Quantile, q, deadline, src)
			}
			if err := p.model().Check(p.brackets(), res.Best.Alloc); err != nil {
				t.Fatalf("job %d: %s plan invalid: %v", j, res.Planner, err)
			}
		}
		if st.Feasible {
			feasibleJobs++
			if !gr.Feasible || !op.Feasible {
				t.Fatalf("job %d: static feasible but greedy %v optimal %v\n%s", j, gr.Feasible, op.Feasible, src)
			}
			if gr.Best.Cost > st.Best.Cost+1e-9 || op.Best.Cost > gr.Best.Cost+1e-9 {
				t.Fatalf("job %d: costs static %.4f greedy %.4f optimal %.4f\n%s", j, st.Best.Cost, gr.Best.Cost, op.Best.Cost, src)
			}
		}
		if gr.Feasible && (!op.Feasible || op.Best.Cost > gr.Best.Cost+1e-9) {
			t.Fatalf("job %d: greedy $%.4f beats optimal $%.4f (feasible %v)\n%s", j, gr.Best.Cost, op.Best.Cost, op.Feasible, src)
		}
	}
	if feasibleJobs < jobs/4 {
		t.Fatalf("only %d of %d random jobs had a feasible static plan: the property was barely exercised", feasibleJobs, jobs)
	}
}

// On small single-bracket jobs the branch and bound agrees with brute force over every plan.
func TestOptimalMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for j := 0; j < 25; j++ {
		src := fmt.Sprintf(`name: t
objective: {metric: acc}
algorithm: {sha: {trials: %d, min_iters: 1, max_iters: %d, eta: 3}}
cluster: {gpus_per_node: 4, price_per_hour: 10, max_nodes: 12, scale_latency: {value: %ds}, init_latency: {dist: uniform, min: 5s, max: 40s}}
profile: {iter_latency: {1: {mean: 30, std: 5}, 2: {mean: 16, std: 2}, 4: {mean: 9, std: 1}, 8: {mean: 6, std: 1}}}
`, 4+r.IntN(20), 9+r.IntN(30), r.IntN(100))
		probe := problem(t, src, 1e9, 0.5, 20)
		deadline := Static(probe).Best.JCT * (0.5 + r.Float64())
		p := problem(t, src, deadline, 0.5, 20)
		op := Optimal(p)
		brute := bruteForce(p)
		if op.Feasible != brute.Feasible || (brute.Feasible && op.Best.Cost > brute.Cost+1e-9) {
			t.Fatalf("job %d: optimal $%.4f (feasible %v), brute force $%.4f (feasible %v)\n%s",
				j, op.Best.Cost, op.Feasible, brute.Cost, brute.Feasible, src)
		}
	}
}

// bruteForce tries the static plan and every elastic plan of a one-bracket job.
func bruteForce(p *Problem) Candidate {
	st, _ := p.static(0)
	return bruteForceFrom(p, st)
}

// bruteForceFrom tries every elastic plan of a one-bracket job, starting from best.
func bruteForceFrom(p *Problem, best Candidate) Candidate {
	opts := p.options(0)[0]
	choice := make([]int, len(opts))
	var walk func(k int)
	walk = func(k int) {
		if k == len(opts) {
			c, ok := p.valid(p.model().Elastic([][]int{choice}))
			if ok && better(c, best) {
				best = c
			}
			return
		}
		for _, g := range opts[k] {
			choice[k] = g
			walk(k + 1)
		}
	}
	walk(0)
	return best
}

func TestInfeasibleReportsFastestPlan(t *testing.T) {
	src := `name: t
objective: {metric: acc}
algorithm: {sha: {trials: 8, min_iters: 1, max_iters: 9, eta: 3}}
cluster: {gpus_per_node: 4, price_per_hour: 10, max_nodes: 4}
profile: {iter_latency: {1: {dist: constant, value: 100}, 4: {dist: constant, value: 30}}}
`
	for _, name := range spec.PlannerNames() {
		p := problem(t, src, 60, 0.5, 5)
		res, err := Run(p, name)
		if err != nil {
			t.Fatal(err)
		}
		if res.Feasible || res.Best.Alloc == nil || res.Best.JCT <= 60 {
			t.Fatalf("%s: feasible %v, fastest JCT %v", name, res.Feasible, res.Best.JCT)
		}
	}
}

func TestNaiveElasticKeepsGPUsPerTrial(t *testing.T) {
	src := `name: t
objective: {metric: acc}
algorithm: {sha: {trials: 16, min_iters: 1, max_iters: 30, eta: 2}}
cluster: {gpus_per_node: 4, price_per_hour: 10, max_nodes: 40}
profile: {iter_latency: {1: {mean: 60, std: 5}, 2: {mean: 31, std: 2}, 4: {mean: 16, std: 1}}}
`
	p := problem(t, src, 3600, 0.5, 20)
	res := NaiveElastic(p)
	if !res.Feasible {
		t.Fatal("no naive-elastic plan")
	}
	g := -1
	for k, sa := range res.Best.Alloc[0] {
		trials := p.brackets()[0].Stages[k].Trials
		if sa.GPUs%trials != 0 || (g >= 0 && sa.GPUs/trials != g) {
			t.Fatalf("stage %d: %d GPUs for %d trials, earlier %d per trial", k, sa.GPUs, trials, g)
		}
		g = sa.GPUs / trials
	}
}

func TestOptions(t *testing.T) {
	p := problem(t, "name: t\nobjective: {metric: acc}\nalgorithm: {sha: {trials: 12, min_iters: 1, max_iters: 9, eta: 3}}\n"+
		"cluster: {gpus_per_node: 4, price_per_hour: 1, max_nodes: 12}\nprofile: {iter_latency: {1: {mean: 1}, 8: {mean: 0.2}}}\n", 100, 0.5, 1)
	got := fmt.Sprint(Options(p.model(), 12))
	// factors 1,2,3,4,6; multiples 12x1, 12x2, 12x4 (8 per trial would need 24 nodes).
	if got != "[1 2 3 4 6 12 24 48]" {
		t.Fatalf("options %s", got)
	}
}

// A cheap but infeasible incumbent must not bound the search: the exact search still finds the
// cheapest feasible plan (brute force agrees).
func TestBranchAndBoundFromInfeasibleIncumbent(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	tested := 0
	for j := 0; j < 100 && tested < 10; j++ {
		src, hyperband := randomJob(r)
		if hyperband {
			continue
		}
		probe := problem(t, src, 1e9, 0.5, 20)
		slowest := Static(probe).Best // a cheap plan, usually slow
		p := problem(t, src, slowest.JCT*0.7, 0.5, 20)
		if spaceSize(p) > 20000 {
			continue
		}
		incumbent := p.evaluate(slowest.Alloc)
		if incumbent.Feasible {
			continue
		}
		brute := bruteForceFrom(p, Candidate{}) // elastic plans only, as the search covers
		if !brute.Feasible {
			continue
		}
		tested++
		got, _ := p.branchAndBound([]int{0}, incumbent, 0)
		if !got.Feasible || got.Cost > brute.Cost+1e-9 {
			t.Fatalf("job %d: from an infeasible $%.4f incumbent found feasible %v $%.4f, brute force $%.4f\n%s",
				j, incumbent.Cost, got.Feasible, got.Cost, brute.Cost, src)
		}
	}
	if tested < 3 {
		t.Fatalf("only %d jobs exercised", tested)
	}
}

func spaceSize(p *Problem) int {
	n := 1
	for _, o := range p.options(0)[0] {
		n *= len(o)
	}
	return n
}

// On small Hyperband jobs the joint branch and bound agrees with brute force over every plan of
// every bracket together (the brackets share max_nodes and the deadline) from greedy's plan, and
// greedy is never cheaper than it.
func TestJointOptimalMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	tested, joint := 0, 0
	for j := 0; j < 400 && tested < 40; j++ {
		src := fmt.Sprintf(`name: t
objective: {metric: acc}
algorithm: {hyperband: {min_iters: 1, max_iters: %d, eta: 3}}
cluster: {gpus_per_node: %d, price_per_hour: 10, max_nodes: %d, billing: {minimum: %ds}, scale_latency: {value: %ds}, init_latency: {dist: uniform, min: 5s, max: 40s}}
profile: {iter_latency: {1: {mean: 30, std: 5}, 2: {mean: 16, std: 2}, 4: {mean: 9, std: 1}}}
`, 3+r.IntN(25), []int{1, 2}[r.IntN(2)], 3+r.IntN(10), r.IntN(120), r.IntN(100))
		probe := problem(t, src, 1e9, 0.5, 12)
		deadline := Static(probe).Best.JCT * (0.4 + r.Float64())
		p := problem(t, src, deadline, 0.5, 12)
		if len(p.brackets()) < 2 || jointSpaceSize(p) > 200000 {
			continue
		}
		tested++
		op, gr := Optimal(p), Greedy(p)
		brute := bruteForceJoint(p, p.greedy()) // greedy's plan may hold nodes, outside the elastic plans
		if !op.Exact || op.Feasible != brute.Feasible || (brute.Feasible && math.Abs(op.Best.Cost-brute.Cost) > 1e-9) {
			t.Fatalf("job %d: optimal $%.4f (feasible %v, exact %v), brute force $%.4f (feasible %v)\n%s",
				j, op.Best.Cost, op.Feasible, op.Exact, brute.Cost, brute.Feasible, src)
		}
		if gr.Feasible && gr.Best.Cost < op.Best.Cost-1e-9 {
			t.Fatalf("job %d: greedy $%.4f below optimal $%.4f", j, gr.Best.Cost, op.Best.Cost)
		}
		// Planning a bracket at a time (the others held) from greedy's plan: where it stops
		// dearer than brute force, only the joint search finds the answer.
		if c := p.bracketAtATime(p.greedy()); brute.Feasible && c.Cost > brute.Cost+1e-9 {
			joint++
		}
	}
	if tested < 30 || joint == 0 {
		t.Fatalf("%d jobs small enough to enumerate, on %d of them a bracket at a time dearer than the joint optimum: the test no longer exercises the joint search", tested, joint)
	}
}

// jointSpaceSize is how many elastic plans of every bracket there are on the default offer.
func jointSpaceSize(p *Problem) int {
	n := 1
	for _, br := range p.options(0) {
		for _, o := range br {
			n *= len(o)
		}
	}
	return n
}

// bruteForceJoint tries every elastic plan of every bracket together, starting from best.
func bruteForceJoint(p *Problem, best Candidate) Candidate {
	opts := p.options(0)
	choice := make([][]int, len(opts))
	for b := range opts {
		choice[b] = make([]int, len(opts[b]))
	}
	var walk func(b, k int)
	walk = func(b, k int) {
		switch {
		case b == len(opts):
			if c, ok := p.valid(p.model().Elastic(choice)); ok && better(c, best) {
				best = c
			}
			return
		case k == len(opts[b]):
			walk(b+1, 0)
			return
		}
		for _, g := range opts[b][k] {
			choice[b][k] = g
			walk(b, k+1)
		}
	}
	walk(0, 0)
	return best
}

// A joint search cut short by its limit says so, and still returns a plan no dearer than its
// incumbent.
func TestJointSearchCutShortIsNotExact(t *testing.T) {
	exp, m := loadModel(t, "../examples/hyperband-81.yaml")
	p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), 50, exp.Seed), 1200, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	incumbent := p.greedy()
	all := []int{0, 1, 2, 3, 4}
	got, exact := p.branchAndBound(all, incumbent, 50)
	if exact || got.Cost > incumbent.Cost {
		t.Fatalf("cut at 50 partial plans: exact %v, $%.4f against the incumbent's $%.4f", exact, got.Cost, incumbent.Cost)
	}
	if _, exact := p.branchAndBound(all, incumbent, 0); !exact {
		t.Fatal("an unlimited search is not exact")
	}
}
