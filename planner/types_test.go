package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// bestSingleType is the cheapest plan that planner name finds on one instance type (in any of
// the markets), and that type.
func bestSingleType(t testing.TB, p *Problem, name string) (Result, string) {
	t.Helper()
	var best Result
	bestType := ""
	seen := map[string]bool{}
	for _, o := range p.model().Offers {
		if seen[o.Type] {
			continue
		}
		seen[o.Type] = true
		typ := o.Type
		res, err := Run(p.Restrict(OffersWhere(p.model(), func(x *sim.Offer) bool { return x.Type == typ })), name)
		if err != nil {
			t.Fatal(err)
		}
		if better(res.Best, best.Best) {
			best, bestType = res, typ
		}
	}
	return best, bestType
}

// The paper's Table 2 job with p3.2xlarge, p3.8xlarge and p3.16xlarge, on demand and on spot
// (examples/paper/table2-types.yaml): at every deadline the plan over all types is never dearer
// than the best single-type plan nor the best on-demand-only plan, and at least one deadline's
// plan mixes types (so it differs from every single-type plan) and is cheaper for it.
func TestInstanceChoicePaper(t *testing.T) {
	exp, m := loadModel(t, "../examples/paper/table2-types.yaml")
	if len(m.Offers) != 6 {
		t.Fatalf("%d offers, want 3 types x 2 markets", len(m.Offers))
	}
	mixed := 0
	for _, minutes := range []float64{20, 30, 40} {
		p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), exp.Planner.Samples, exp.Seed), minutes*60, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{spec.PlannerGreedy, spec.PlannerOptimal} {
			all, err := Run(p, name)
			if err != nil || !all.Feasible {
				t.Fatalf("%v min %s: feasible %v, %v", minutes, name, all.Feasible, err)
			}
			single, typ := bestSingleType(t, p, name)
			onDemand, err := Run(p.Restrict(OffersWhere(m, func(o *sim.Offer) bool { return o.Market == spec.MarketOnDemand })), name)
			if err != nil {
				t.Fatal(err)
			}
			if all.Best.Cost > single.Best.Cost+1e-9 || all.Best.Cost > onDemand.Best.Cost+1e-9 {
				t.Errorf("%v min %s: $%.2f over all types, dearer than $%.2f on %s alone or $%.2f on demand", minutes, name, all.Best.Cost, single.Best.Cost, typ, onDemand.Best.Cost)
			}
			types := map[string]bool{}
			for _, sa := range all.Best.Alloc[0] {
				o, _ := m.OfferIndex(sa)
				types[m.Offers[o].Type] = true
			}
			if len(types) > 1 && all.Best.Cost < single.Best.Cost-1e-9 {
				mixed++
			}
			t.Logf("%v min %s: $%.2f (%s), best single type %s $%.2f (%.1f%% saved), on demand only $%.2f (%.1f%% saved)", minutes, name,
				all.Best.Cost, describe(m, all.Best.Alloc), typ, single.Best.Cost, 100*(1-all.Best.Cost/single.Best.Cost),
				onDemand.Best.Cost, 100*(1-all.Best.Cost/onDemand.Best.Cost))
		}
	}
	if mixed == 0 {
		t.Fatal("no deadline's plan mixes types to save against the best single type")
	}
}

// describe writes an allocation as GPUs@type/market per stage.
func describe(m *sim.Model, a sim.Alloc) string {
	s := ""
	for b, stages := range a {
		if b > 0 {
			s += " | "
		}
		for k, sa := range stages {
			o, _ := m.OfferIndex(sa)
			if k > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%d@%s/%s", sa.GPUs, m.Offers[o].Type, m.Offers[o].Market)
		}
	}
	return s
}

// randomTypesJob draws a small job with two or three instance types of random sizes, prices and
// profiles, on demand and perhaps on spot.
func randomTypesJob(r *rand.Rand) (src string, brackets int) {
	var alg string
	switch r.IntN(4) {
	case 0:
		alg = fmt.Sprintf("{hyperband: {min_iters: 1, max_iters: %d, eta: 3}}", 3+r.IntN(7))
		brackets = 2
	default:
		alg = fmt.Sprintf("{sha: {trials: %d, min_iters: 1, max_iters: %d, eta: %d}}", 2+r.IntN(20), 5+r.IntN(30), 2+r.IntN(2))
		brackets = 1
	}
	types := ""
	for i := range 2 + r.IntN(2) {
		gpn := []int{1, 2, 4, 8}[r.IntN(4)]
		t1 := 5 + r.Float64()*40
		types += fmt.Sprintf("{instance_type: t%d, gpus_per_node: %d, price_per_hour: %.2f, spot_price_per_hour: %.2f, scale_latency: {value: %ds},"+
			" profile: {iter_latency: {1: {mean: %.2f, std: %.2f}, 2: {mean: %.2f, std: 0.3}, 4: {mean: %.2f, std: 0.2}, 8: {mean: %.2f, std: 0.1}}, startup_latency: {value: %ds}}}, ",
			i, gpn, float64(gpn)*(1+r.Float64()*3), float64(gpn)*(0.3+r.Float64()), r.IntN(60), t1, t1*0.1, t1/(1.5+r.Float64()), t1/(2.5+r.Float64()*1.5), t1/(3+r.Float64()*4), r.IntN(20))
	}
	markets := "[on-demand]"
	if r.IntN(2) == 0 {
		markets = "[on-demand, spot]"
	}
	cluster := fmt.Sprintf("{instance_types: [%s], markets: %s, spot: {interruptions_per_hour: %.2f}, max_nodes: %d, init_latency: {value: %ds}}",
		types, markets, r.Float64()*2, 4+r.IntN(12), r.IntN(30))
	return fmt.Sprintf("name: t\nseed: %d\nobjective: {metric: acc}\nalgorithm: %s\ncluster: %s\nprofile: {iter_latency: {1: {mean: 10}}}\n", r.IntN(1000), alg, cluster), brackets
}

// On random small jobs with several instance types, at deadlines between the fastest plan and a
// relaxed one: the plan over every type is never dearer than the best plan on one type (greedy
// by construction, optimal by exactness on one bracket), optimal is never dearer than greedy,
// and every feasible plan meets its deadline and max_nodes.
func TestTypesNeverDearerProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	jobs, checked := 40, 0
	if testing.Short() {
		jobs = 12
	}
	for j := range jobs {
		src, brackets := randomTypesJob(r)
		probe := problem(t, src, 1e9, 0.5, 20)
		fast := Greedy(probe)
		if !fast.Feasible {
			continue
		}
		deadline := fast.Best.JCT * (0.7 + r.Float64()*1.5)
		p := problem(t, src, deadline, 0.5, 20)
		gr, op := Greedy(p), Optimal(p)
		sgr, _ := bestSingleType(t, p, spec.PlannerGreedy)
		sop, _ := bestSingleType(t, p, spec.PlannerOptimal)
		for _, res := range []Result{gr, op} {
			if !res.Feasible {
				continue
			}
			if err := p.model().Check(p.brackets(), res.Best.Alloc); err != nil {
				t.Fatalf("job %d: %s plan invalid: %v\n%s", j, res.Planner, err, src)
			}
			if q := sim.Quantile(p.Sim.Evaluate(res.Best.Alloc).JCT, 0.5); q > deadline {
				t.Fatalf("job %d: %s plan's median %.1f misses the deadline %.1f\n%s", j, res.Planner, q, deadline, src)
			}
		}
		if sgr.Feasible && (!gr.Feasible || gr.Best.Cost > sgr.Best.Cost+1e-9) {
			t.Fatalf("job %d: greedy over all types $%.4f (feasible %v), on one type $%.4f\n%s", j, gr.Best.Cost, gr.Feasible, sgr.Best.Cost, src)
		}
		if brackets == 1 && sop.Feasible && (!op.Feasible || op.Best.Cost > sop.Best.Cost+1e-9) {
			t.Fatalf("job %d: optimal over all types $%.4f (feasible %v), on one type $%.4f\n%s", j, op.Best.Cost, op.Feasible, sop.Best.Cost, src)
		}
		if gr.Feasible && (!op.Feasible || op.Best.Cost > gr.Best.Cost+1e-9) {
			t.Fatalf("job %d: optimal $%.4f dearer than greedy $%.4f\n%s", j, op.Best.Cost, gr.Best.Cost, src)
		}
		if sgr.Feasible {
			checked++
		}
	}
	if checked < jobs/3 {
		t.Fatalf("only %d of %d jobs had a feasible single-type plan: the property was barely exercised", checked, jobs)
	}
}

// On one bracket the branch and bound over (type, market, GPUs) per stage agrees with brute
// force over every such plan.
func TestOptimalTypesMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	compared := 0
	for j := 0; j < 60 && compared < 6; j++ {
		src, p, ok := smallTypesJob(t, r, false, 20000)
		if !ok {
			continue
		}
		op := Optimal(p)
		brute := bruteForceTypes(p, Static(p).Best)
		if op.Feasible != brute.Feasible || (brute.Feasible && op.Best.Cost > brute.Cost+1e-9) {
			t.Fatalf("job %d: optimal $%.4f (feasible %v), brute force $%.4f (feasible %v)\n%s", j, op.Best.Cost, op.Feasible, brute.Cost, brute.Feasible, src)
		}
		compared++
	}
	if compared < 6 {
		t.Fatalf("only %d jobs small enough to brute-force", compared)
	}
}

// smallTypesJob draws a random multi-type job, Hyperband or one bracket as asked, and returns
// it with a deadline between its fastest greedy plan's and a relaxed one, when its plan space
// (every (offer, GPUs) per stage) is at most most plans.
func smallTypesJob(t *testing.T, r *rand.Rand, hyperband bool, most int) (string, *Problem, bool) {
	src, brackets := randomTypesJob(r)
	if (brackets > 1) != hyperband {
		return "", nil, false
	}
	probe := problem(t, src, 1e9, 0.5, 10)
	fast := Greedy(probe)
	if !fast.Feasible || spaceSizeTypes(probe) > most {
		return "", nil, false
	}
	return src, problem(t, src, fast.Best.JCT*(0.8+r.Float64()), 0.5, 10), true
}

// stageChoices lists every (offer, GPUs) allocation of stage k of bracket b.
func stageChoices(p *Problem, b, k int) []sim.StageAlloc {
	var out []sim.StageAlloc
	for _, o := range p.allowed() {
		for _, g := range p.options(o)[b][k] {
			out = append(out, p.stageAlloc(g, o))
		}
	}
	return out
}

func spaceSizeTypes(p *Problem) int {
	n := 1
	for b, br := range p.brackets() {
		for k := range br.Stages {
			n *= len(stageChoices(p, b, k))
		}
	}
	return n
}

// bruteForceTypes tries every plan that gives each stage of every bracket an (offer, GPUs)
// choice, starting from best.
func bruteForceTypes(p *Problem, best Candidate) Candidate {
	var slots [][2]int
	for b, br := range p.brackets() {
		for k := range br.Stages {
			slots = append(slots, [2]int{b, k})
		}
	}
	a := make(sim.Alloc, len(p.brackets()))
	for b, br := range p.brackets() {
		a[b] = make([]sim.StageAlloc, len(br.Stages))
	}
	var walk func(i int)
	walk = func(i int) {
		if i == len(slots) {
			if c, ok := p.valid(a.Clone()); ok && better(c, best) {
				best = c
			}
			return
		}
		b, k := slots[i][0], slots[i][1]
		for _, sa := range stageChoices(p, b, k) {
			a[b][k] = sa
			walk(i + 1)
		}
	}
	walk(0)
	return best
}

// The joint optimal planner against brute force over every joint plan, on small Hyperband jobs
// with several instance types: never dearer (it may be cheaper, where greedy's plan holds nodes
// outside the elastic plans brute force walks), and its search complete.
func TestHyperbandTypesJointOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	n := 0
	for j := 0; n < 8 && j < 200; j++ {
		src, p, ok := smallTypesJob(t, r, true, 60000)
		if !ok {
			continue
		}
		op := Optimal(p)
		brute := bruteForceTypes(p, Static(p).Best)
		if !brute.Feasible {
			continue
		}
		n++
		if !op.Feasible || !op.Exact || op.Best.Cost > brute.Cost+1e-9 {
			t.Fatalf("job %d: brute force finds $%.4f, optimal $%.4f (feasible %v, exact %v)\n%s", j, brute.Cost, op.Best.Cost, op.Feasible, op.Exact, src)
		}
	}
	if n < 4 {
		t.Fatalf("only %d Hyperband jobs small enough to brute-force", n)
	}
}
