package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// job parses a spec made of the given parts and returns its simulator.
func job(t testing.TB, algorithm, cluster, profile string, samples int, seed int64) *Simulator {
	t.Helper()
	exp, m := parseJob(t, algorithm, cluster, profile)
	return New(m, exp.Algorithm.Brackets(), samples, seed)
}

// parseJob parses a spec made of the given parts and returns it with its model.
func parseJob(t testing.TB, algorithm, cluster, profile string) (*spec.Experiment, *Model) {
	t.Helper()
	src := fmt.Sprintf("name: t\nobjective: {metric: acc}\nalgorithm: %s\ncluster: %s\nprofile: %s\n", algorithm, cluster, profile)
	exp, err := spec.Parse("t.yaml", []byte(src), nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	m, err := NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	return exp, m
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Constant latencies, worked out by hand. Node price $3.60/h = $0.001/s; SCALE 10 s, INIT 20 s,
// startup 5 s, an iteration 10 s on 1 GPU and 6 s on 2.
func TestConstantLatenciesExact(t *testing.T) {
	const cluster = "{gpus_per_node: 4, price_per_hour: 3.6, scale_latency: {value: 10s}, init_latency: {value: 20s}%s}"
	const profile = "{iter_latency: {1: {dist: constant, value: 10}, 2: {dist: constant, value: 6}}, startup_latency: {value: 5s}}"
	for _, tc := range []struct {
		name         string
		stages       string
		clusterExtra string
		gpus         [][]int
		jct, cost    float64
	}{
		// Stage 0: SCALE 10 + INIT 20, then 4 trials x (5 + 3x10) = 35 in parallel: 65 s.
		// Stage 1: 2 trials x 2 GPUs x (5 + 5x6) = 35 s. JCT 100 s; the node is billed from
		// the end of SCALE (t=10) to the end: 90 s = $0.09.
		{"one node two stages", "[{trials: 4, iters: 3}, {trials: 2, iters: 5}]", "", [][]int{{4, 4}}, 100, 0.09},
		// 10 + 20 + 5 + 10 = 45 s; billed 35 s, raised to the 60 s minimum: $0.06.
		{"minimum charge", "[{trials: 1, iters: 1}]", "", [][]int{{1}}, 45, 0.06},
		// Billed 90 s, rounded up to two 60 s increments: $0.12.
		{"rounding increment", "[{trials: 4, iters: 3}, {trials: 2, iters: 5}]", ", billing: {increment: 60s}", [][]int{{4, 4}}, 100, 0.12},
		// Stage 0 holds 2 nodes (8 trials); the second is released at its SYNC (t=65): billed
		// 55 s -> 60 s minimum = $0.06; the first 90 s = $0.09. Total $0.15.
		{"scale down", "[{trials: 8, iters: 3}, {trials: 2, iters: 5}]", "", [][]int{{8, 4}}, 100, 0.15},
		// 2 GPUs for 4 trials: two waves of 35 s on two slots: 10 + 20 + 70 = 100 s, billed 90.
		{"waves", "[{trials: 4, iters: 3}]", "", [][]int{{2}}, 100, 0.09},
		// 1 GB at 8 Gbps: DATA takes 1 s and costs $0.50 per new node: JCT 101, 91 s billed.
		{"data", "[{trials: 4, iters: 3}, {trials: 2, iters: 5}]", ", network_gbps: 8, data: {size_gb: 1, price_per_gb: 0.5}", [][]int{{4, 4}}, 101, 0.091 + 0.5},
		// Per function: 4 x 1 GPU x 35 s + 2 x 2 GPUs x 35 s = 280 GPU-s at $0.00025 = $0.07.
		{"per function", "[{trials: 4, iters: 3}, {trials: 2, iters: 5}]", ", billing: {model: per-function}", [][]int{{4, 4}}, 100, 0.07},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := job(t, "{stages: "+tc.stages+"}", fmt.Sprintf(cluster, tc.clusterExtra), profile, 3, 1)
			res, err := s.Simulate(s.Model().Elastic(tc.gpus))
			if err != nil {
				t.Fatal(err)
			}
			if res.JCT.Mean != tc.jct || res.JCT.Std != 0 || res.JCT.P95 != tc.jct {
				t.Errorf("JCT %+v, want exactly %v", res.JCT, tc.jct)
			}
			if !near(res.Cost.Mean, tc.cost, 1e-12) || res.Cost.Std > 1e-12 {
				t.Errorf("cost %+v, want exactly %v", res.Cost, tc.cost)
			}
			sum := 0.0
			for _, st := range res.Brackets[0].Stages {
				sum += st.Cost
			}
			if !near(sum, res.Cost.Mean, 1e-12) {
				t.Errorf("stage costs add up to %v, total %v", sum, res.Cost.Mean)
			}
		})
	}
}

// Two trials in parallel, one iteration each of N(mu, sigma): the stage takes the larger,
// whose mean is mu + sigma/sqrt(pi).
func TestTwoParallelNormalsExpectedMax(t *testing.T) {
	const mu, sigma, n = 100.0, 10.0, 40000
	s := job(t, "{stages: [{trials: 2, iters: 1}]}", "{gpus_per_node: 2, price_per_hour: 1}",
		fmt.Sprintf("{iter_latency: {1: {mean: %v, std: %v}}}", mu, sigma), n, 3)
	res, err := s.Simulate(s.Model().Elastic([][]int{{2}}))
	if err != nil {
		t.Fatal(err)
	}
	want := mu + sigma/math.Sqrt(math.Pi)
	se := res.JCT.Std / math.Sqrt(n)
	if !near(res.JCT.Mean, want, 4*se) {
		t.Fatalf("E[stage] = %.3f, want %.3f within %.3f", res.JCT.Mean, want, 4*se)
	}
}

func TestSameSeedSameNumbers(t *testing.T) {
	run := func(seed int64) Result {
		s := job(t, "{sha: {trials: 27, min_iters: 1, max_iters: 27, eta: 3}}",
			"{instance_type: p3.8xlarge, scale_latency: {dist: normal, mean: 15s, std: 3s}, init_latency: {dist: lognormal, mean: 20s, std: 5s}}",
			"{iter_latency: {1: {mean: 10, std: 2}, 4: {mean: 3, std: 1}}, startup_latency: {dist: uniform, min: 1s, max: 4s}}", 200, seed)
		res, err := s.Simulate(s.Model().Elastic([][]int{{27, 36, 12, 4}}))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b, c := run(5), run(5), run(6)
	if a.JCT != b.JCT || a.Cost != b.Cost {
		t.Fatalf("same seed: %+v vs %+v", a.JCT, b.JCT)
	}
	if a.JCT == c.JCT {
		t.Fatalf("different seeds gave identical JCT %+v", a.JCT)
	}
}

// The whole-job DAG has the nodes the design prescribes, and its critical path with constant
// latencies is the simulator's JCT.
func TestBuildDAGShapeAndCriticalPath(t *testing.T) {
	s := job(t, "{sha: {trials: 9, min_iters: 1, max_iters: 9, eta: 3}}",
		"{gpus_per_node: 2, price_per_hour: 1, network_gbps: 10, scale_latency: {value: 7s}, init_latency: {value: 3s}, data: {size_gb: 1.25}}",
		"{iter_latency: {1: {dist: constant, value: 4}, 2: {dist: constant, value: 3}}, startup_latency: {value: 1s}}", 1, 1)
	// Stages: 9 trials x 1 iter, 3 x 3, 1 x 5. Plan: 4 GPUs (waves), 6 GPUs (3x2), 2 GPUs.
	a := s.Model().Elastic([][]int{{4, 6, 2}})
	g, err := BuildDAG(s.Model(), s.Brackets(), a)
	if err != nil {
		t.Fatal(err)
	}
	count := map[Kind]int{}
	for i, n := range g.Nodes {
		count[n.Kind]++
		for _, p := range n.Preds {
			if p >= i {
				t.Fatalf("node %d has predecessor %d: not topological", i, p)
			}
		}
	}
	// SCALE at stages 0 (2 nodes) and 1 (+1 node); INIT and DATA per new node.
	want := map[Kind]int{Scale: 2, InitInstance: 3, Data: 3, Train: 13, Sync: 3}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%v nodes: %d, want %d", k, count[k], n)
		}
	}
	// By hand: stage 0: 7 + 3 + 1 (data) + 3 waves x (1 + 4) = 26; stage 1: 7 + 3 + 1 + (1 + 3x3) = 21;
	// stage 2: 1 + 5x3 = 16. Total 63.
	cp := g.CriticalPath(s.Model(), spec.NewRand(1, 1), nil, nil)
	res, _ := s.Simulate(a)
	if cp != 63 || res.JCT.Mean != 63 {
		t.Fatalf("critical path %v, simulated JCT %v, want 63", cp, res.JCT.Mean)
	}
	if st := res.Brackets[0].Stages[0]; st.Waves != 3 || st.GPUsPerTrial != 1 || st.Nodes != 2 {
		t.Errorf("stage 0 breakdown %+v", st)
	}
}

// Per-function billing charges only the GPU-seconds trials use, so it never costs more than
// holding whole instances; and more straggler variance never makes per-instance billing cheaper.
func TestBillingModelsAndStragglers(t *testing.T) {
	const alg = "{sha: {trials: 64, min_iters: 4, max_iters: 508, eta: 2}}"
	gpus := [][]int{{64, 64, 32, 16, 8, 4, 2}}
	prev := 0.0
	for _, sigma := range []float64{0, 1, 2, 4, 7, 10} {
		prof := fmt.Sprintf("{iter_latency: {1: {mean: 4, std: %v}, 2: {mean: 2.2, std: %v}, 4: {mean: 1.2, std: %v}}, startup_latency: {value: 2s}}", sigma, sigma/2, sigma/4)
		inst := job(t, alg, "{instance_type: p3.8xlarge, scale_latency: {value: 15s}}", prof, 500, 9)
		fn := job(t, alg, "{instance_type: p3.8xlarge, scale_latency: {value: 15s}, billing: {model: per-function}}", prof, 500, 9)
		ri, err := inst.Simulate(inst.Model().Elastic(gpus))
		if err != nil {
			t.Fatal(err)
		}
		rf, _ := fn.Simulate(fn.Model().Elastic(gpus))
		if rf.Cost.Mean > ri.Cost.Mean {
			t.Errorf("sigma %v: per-function $%.2f above per-instance $%.2f", sigma, rf.Cost.Mean, ri.Cost.Mean)
		}
		if ri.Cost.Mean < prev {
			t.Errorf("sigma %v: per-instance cost fell to $%.2f from $%.2f", sigma, ri.Cost.Mean, prev)
		}
		prev = ri.Cost.Mean
	}
}

func TestIterLatencyInterpolation(t *testing.T) {
	s := job(t, "{stages: [{trials: 1, iters: 1}]}", "{gpus_per_node: 4, price_per_hour: 1}",
		"{iter_latency: {1: {mean: 64, std: 4}, 4: {mean: 16, std: 1}, 16: {mean: 8}}}", 1, 1)
	m := s.Model()
	// log-log between (1, 64) and (4, 16): at 2 GPUs, 32 s.
	if got := m.IterLatency(2).Mean(); !near(got, 32, 1e-9) {
		t.Errorf("2 GPUs: mean %v, want 32", got)
	}
	if got := m.IterLatency(8).Mean(); !near(got, 8*math.Sqrt2, 1e-9) {
		t.Errorf("8 GPUs: mean %v, want %v", got, 8*math.Sqrt2)
	}
	for g, want := range map[int]bool{1: true, 2: true, 3: false, 4: true, 6: false, 8: true, 12: true, 16: true, 20: false} {
		if m.ValidTrialGPUs(g) != want {
			t.Errorf("ValidTrialGPUs(%d) = %v", g, !want)
		}
	}
	if err := m.Check(s.Brackets(), Alloc{{{GPUs: 20, Nodes: 5}}}); err == nil || !strings.Contains(err.Error(), "not placeable") {
		t.Errorf("20 GPUs per trial accepted: %v", err)
	}
}

func TestTruncNormalMoments(t *testing.T) {
	d := NewTruncNormal(4, 10)
	r := spec.NewRand(1, 1)
	const n = 200000
	sum, sq := 0.0, 0.0
	for range n {
		x := d.Sample(r)
		if x < 0 {
			t.Fatal("negative sample")
		}
		sum += x
		sq += x * x
	}
	mean := sum / n
	vr := sq/n - mean*mean
	if !near(mean, d.Mean(), 0.05) || !near(vr, d.Var(), 0.02*d.Var()) {
		t.Fatalf("sampled mean %v var %v, formula %v %v", mean, vr, d.Mean(), d.Var())
	}
}
