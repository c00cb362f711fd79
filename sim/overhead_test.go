package sim

import (
	"math"
	"slices"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// The run path's overhead and the first-stage lag, worked by hand on constant latencies. Node
// price $3.60/h = $0.001/s, 2 GPUs a node, billed by the second from the end of its SCALE.
// SCALE 3 s, INIT 1 s; start-up 2 s, overhead 0.5 s a launch, an iteration 1 s on 1 GPU; the
// first stage held back 4.5 s once.
//
// Stage 1: 4 trials of 2 iterations on 2 GPUs: two chains of two trials, each trial 2 + 0.5 +
// 2 = 4.5 s, a chain 9 s; after the scale-up (4 s) and the lag (4.5 s), it ends at 17.5 s.
// Stage 2: 2 trials of 3 iterations on 2 GPUs, one each: 2 + 0.5 + 3 = 5.5 s, no lag (its trials
// resume from checkpoints): JCT 23 s. The node runs from 3 s to 23 s: 20 s, $0.020. Without
// the overhead and the lag: 4 + 8 + 5 = 17 s, $0.014.
func TestOverheadAndFirstStageLagByHand(t *testing.T) {
	const alg = "{stages: [{trials: 4, iters: 2}, {trials: 2, iters: 3}]}"
	const cluster = "{gpus_per_node: 2, price_per_hour: 3.6, billing: {minimum: 0s}, scale_latency: {value: 3s}, init_latency: {value: 1s}, max_nodes: 1}"
	const bare = "{iter_latency: {1: {value: 1}, 2: {value: 0.6}}, startup_latency: {value: 2s}"
	for _, c := range []struct {
		name      string
		profile   string
		jct, cost float64
		stage1    float64 // the first stage's duration, scale-up included
	}{
		{"without", bare + "}", 17, 0.014, 12},
		{"with", bare + ", launch_overhead: {value: 0.5s}, first_stage_lag: {value: 4.5s}}", 23, 0.020, 17.5},
	} {
		for _, exact := range []bool{false, true} {
			name := c.name + " by chains"
			if exact {
				name = c.name + " trial by trial"
			}
			t.Run(name, func(t *testing.T) {
				s := job(t, alg, cluster, c.profile, 3, 1)
				if exact {
					s.DrawTrialByTrial()
				}
				res, err := s.Simulate(s.Model().Elastic([][]int{{2, 2}}))
				if err != nil {
					t.Fatal(err)
				}
				if !near(res.JCT.Mean, c.jct, 1e-9) || !near(res.JCT.Std, 0, 1e-9) || !near(res.Cost.Mean, c.cost, 1e-12) {
					t.Fatalf("JCT %v (std %v), cost %v; by hand %v, %v", res.JCT.Mean, res.JCT.Std, res.Cost.Mean, c.jct, c.cost)
				}
				if got := res.Brackets[0].Stages[0].Duration; !near(got, c.stage1, 1e-9) {
					t.Fatalf("first stage %v s, by hand %v", got, c.stage1)
				}
			})
		}
	}
	// The whole job's DAG: one FIRST_STAGE_LAG node, before the first stage's TRAIN nodes only,
	// and the same critical path.
	exp, m := parseJob(t, alg, cluster, bare+", launch_overhead: {value: 0.5s}, first_stage_lag: {value: 4.5s}}")
	g, err := BuildDAG(m, exp.Algorithm.Brackets(), m.Elastic([][]int{{2, 2}}))
	if err != nil {
		t.Fatal(err)
	}
	lags := 0
	for _, n := range g.Nodes {
		if n.Kind == FirstStageLag {
			lags++
			if n.Stage != 0 {
				t.Errorf("a lag before stage %d", n.Stage+1)
			}
		}
		if n.Kind == Train && n.Stage == 0 && n.Trial < 2 && g.Nodes[n.Preds[0]].Kind != FirstStageLag {
			t.Errorf("first-wave trial %d waits for %s, not the lag", n.Trial, g.Nodes[n.Preds[0]].Kind)
		}
	}
	if jct := g.CriticalPath(m, spec.NewRand(1, 1), nil, nil); lags != 1 || !near(jct, 23, 1e-9) {
		t.Fatalf("%d lag nodes, critical path %v (23 by hand)", lags, jct)
	}
}

// A re-plan's rest, stages that resume from checkpoints, does not wait for the lag; a stage the
// profile has no lag for does not either; nor do a later round's brackets.
func TestFirstStageLagOnlyAtTheStart(t *testing.T) {
	_, m := parseJob(t, "{stages: [{trials: 2, iters: 1}]}", "{gpus_per_node: 2, price_per_hour: 3.6}",
		"{iter_latency: {1: {value: 1}}, first_stage_lag: {value: 4s}}")
	fresh := spec.Bracket{Stages: []spec.Stage{{Trials: 2, Iters: 1}}}
	rest := spec.Bracket{Stages: []spec.Stage{{Trials: 2, Iters: 1, StartIter: 3}}}
	later := spec.Bracket{Stages: []spec.Stage{{Trials: 2, Iters: 1}}, Round: 1}
	if !m.lags(fresh, 0) || m.lags(rest, 0) || m.lags(later, 0) {
		t.Fatalf("lags: fresh %v, rest %v, later round %v", m.lags(fresh, 0), m.lags(rest, 0), m.lags(later, 0))
	}
	s := New(m, []spec.Bracket{rest}, 2, 1)
	s.Hold([]int{1})
	if got := s.EvaluateBracket(0, []StageAlloc{{GPUs: 2, Nodes: 1}}).JCT[0]; !near(got, 1, 1e-12) {
		t.Fatalf("the rest took %v s, want its one iteration", got)
	}
}

// In ASHA the overhead is a start-up's, and the first wave, the jobs launched before any ended,
// gets going late by the lag: with constant latencies every event moves by it, so the JCT grows
// by exactly the lag, and the cost by the lag's node-seconds.
func TestASHAOverheadAndLag(t *testing.T) {
	const alg = "{asha: {trials: 9, min_iters: 1, max_iters: 9, eta: 3}}"
	const cluster = "{gpus_per_node: 2, price_per_hour: 3.6, billing: {minimum: 0s}, scale_latency: {value: 3s}, init_latency: {value: 1s}}"
	run := func(profile string) ASHAOutcome {
		exp, m := parseJob(t, alg, cluster, "{iter_latency: {1: {value: 1}}, "+profile+"}")
		out, err := m.SimulateASHA(*exp.Algorithm.ASHA, ASHAPlan{GPUs: []int{4}}, 4, 7)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	base := run("startup_latency: {value: 2.5s}")
	split := run("startup_latency: {value: 2s}, launch_overhead: {value: 0.5s}")
	lagged := run("startup_latency: {value: 2s}, launch_overhead: {value: 0.5s}, first_stage_lag: {value: 3s}")
	for i := range base.JCT {
		if split.JCT[i] != base.JCT[i] || split.Cost[i] != base.Cost[i] {
			t.Fatalf("sample %d: overhead 0.5 s took %v s, $%v; start-up 0.5 s longer %v s, $%v", i, split.JCT[i], split.Cost[i], base.JCT[i], base.Cost[i])
		}
		if !near(lagged.JCT[i], base.JCT[i]+3, 1e-9) || !near(lagged.Cost[i], base.Cost[i]+2*3*0.001, 1e-12) {
			t.Fatalf("sample %d: with the lag %v s, $%v; without %v s, $%v", i, lagged.JCT[i], lagged.Cost[i], base.JCT[i], base.Cost[i])
		}
	}
}

// Evidence that only the first stage was slow to start, its first wave's start-ups 15 s against
// the profile's 10 s, leaves the iterations and the start-up at the prior: it moves the lag
// alone, by what the first wave took beyond the start-up (5 s a launch, 3 launches against the
// profile's as priorStartups): from 0 to 3*5/(2+3) = 3 s, or from a profile's 4 s to
// (2*4 + 3*5)/5 = 4.6 s. The same start-ups outside the first wave would have moved the start-up.
func TestFirstWaveIsNotASlowerTrainer(t *testing.T) {
	cluster := "{gpus_per_node: 1, price_per_hour: 3.6, max_nodes: 8}"
	for _, c := range []struct {
		lag      string
		prior    float64
		posterio float64
	}{{"", 0, 3}, {", first_stage_lag: {value: 4s}", 4, 4.6}} {
		profile := "{iter_latency: {1: {mean: 2, std: 0.2}, 2: {mean: 1.2, std: 0.1}}, startup_latency: {value: 10s}" + c.lag + "}"
		m := job(t, "{stages: [{trials: 1, iters: 1}]}", cluster, profile, 10, 1).Model()
		p := m.Posterior(Evidence{FirstWave: map[int]Observed{0: {Sum: 45, N: 3}}})
		for _, g := range []int{1, 2} {
			if p.IterLatency(g).Mean() != m.IterLatency(g).Mean() {
				t.Errorf("%d GPUs: %v per iteration, the prior's %v", g, p.IterLatency(g).Mean(), m.IterLatency(g).Mean())
			}
		}
		if p.Startup.Mean() != 10 || p.Overhead.Mean() != 0 {
			t.Errorf("start-up %v, overhead %v: the prior's 10 and 0", p.Startup.Mean(), p.Overhead.Mean())
		}
		if got := p.FirstLag.Mean(); math.Abs(got-c.posterio) > 1e-12 || m.FirstLag.Mean() != c.prior {
			t.Errorf("lag %v from %v, by hand %v", got, m.FirstLag.Mean(), c.posterio)
		}
		if later := m.Posterior(Evidence{Startup: map[int]Observed{0: {Sum: 45, N: 3}}}); later.Startup.Mean() != (2*10+45)/5.0 || later.FirstLag.Mean() != c.prior {
			t.Errorf("later start-ups: start-up %v, lag %v", later.Startup.Mean(), later.FirstLag.Mean())
		}
	}
}

// Start-up contention, worked by hand on the job above without overhead or lag: each stage's
// first wave launches its two trials at once and the second starts 0.25 s after the first.
// Stage 1: chains of 2 + 2 + 2 + 2 = 8 s and 0.25 + 8 = 8.25 s: after the scale-up, 12.25 s.
// Stage 2: 5 s and 5.25 s: JCT 17.5 s; the node from 3 s to 17.5 s, billed 15 s: $0.015. The later trial of
// each chain launches alone, as a slot frees, and waits for nobody.
func TestStartupContentionByHand(t *testing.T) {
	const alg = "{stages: [{trials: 4, iters: 2}, {trials: 2, iters: 3}]}"
	const cluster = "{gpus_per_node: 2, price_per_hour: 3.6, billing: {minimum: 0s}, scale_latency: {value: 3s}, init_latency: {value: 1s}, max_nodes: 1}"
	const profile = "{iter_latency: {1: {value: 1}, 2: {value: 0.6}}, startup_latency: {value: 2s}, startup_contention: 0.25s}"
	// By GPU count, the launches' own: a trial a GPU here, so the 2-GPU count's 9 s is not paid.
	const byGPUs = "{iter_latency: {1: {value: 1}, 2: {value: 0.6}}, startup_latency: {value: 2s}, startup_contention: {1: 0.25s, 2: 9s}}"
	for _, prof := range []string{profile, byGPUs} {
		for _, exact := range []bool{false, true} {
			s := job(t, alg, cluster, prof, 3, 1)
			if exact {
				s.DrawTrialByTrial()
			}
			res, err := s.Simulate(s.Model().Elastic([][]int{{2, 2}}))
			if err != nil {
				t.Fatal(err)
			}
			if !near(res.JCT.Mean, 17.5, 1e-9) || !near(res.Cost.Mean, 0.015, 1e-12) || !near(res.Brackets[0].Stages[0].Duration, 12.25, 1e-9) {
				t.Fatalf("%s, trial by trial %v: JCT %v, cost %v, first stage %v; by hand 17.5, 0.015, 12.25", prof, exact, res.JCT.Mean, res.Cost.Mean, res.Brackets[0].Stages[0].Duration)
			}
		}
	}
	exp, m := parseJob(t, alg, cluster, profile)
	g, err := BuildDAG(m, exp.Algorithm.Brackets(), m.Elastic([][]int{{2, 2}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Nodes {
		if want := map[bool]int{true: n.Trial, false: 0}[n.Stage == 0 && n.Trial < 2 || n.Stage == 1]; n.Kind == Train && n.Queue != want {
			t.Errorf("stage %d trial %d queues behind %d launches, want %d", n.Stage+1, n.Trial, n.Queue, want)
		}
	}
}

// By chains, contention is drawn as if every chain started as late as the last (an upper bound):
// on a noisy stage of long chains the two ways agree within that bound, and contention lengthens
// the stage by at most the last chain's wait.
func TestStartupContentionByChainsIsBounded(t *testing.T) {
	const alg = "{stages: [{trials: 8, iters: 40}]}"
	const cluster = "{gpus_per_node: 8, price_per_hour: 3.6, billing: {minimum: 0s}, scale_latency: {value: 3s}, max_nodes: 1}"
	const noisy = "{iter_latency: {1: {mean: 1, std: 0.3}}, startup_latency: {value: 2s}"
	mean := func(profile string, exact bool) float64 {
		s := job(t, alg, cluster, profile, 4000, 1)
		if exact {
			s.DrawTrialByTrial()
		}
		res, err := s.Simulate(s.Model().Elastic([][]int{{8}}))
		if err != nil {
			t.Fatal(err)
		}
		return res.JCT.Mean
	}
	const wait = 7 * 0.5 // the last of 8 launches at once
	// By GPU count, a trial's own one GPU's.
	for _, contention := range []string{"0.5", "{1: 0.5, 8: 20}"} {
		calm, chains, exact := mean(noisy+"}", true), mean(noisy+", startup_contention: "+contention+"}", false), mean(noisy+", startup_contention: "+contention+"}", true)
		if !(exact > calm+0.5 && exact <= calm+wait+0.05) || !(chains >= exact-0.05 && chains <= exact+wait+0.05) {
			t.Fatalf("contention %s: mean JCT %.3f without contention, %.3f with (trial by trial), %.3f by chains; the last launch waits %.1f s", contention, calm, exact, chains, wait)
		}
	}
}

// Burst places launches at one moment one behind another, and starts again at the next moment,
// the zero moment included.
func TestBurst(t *testing.T) {
	var b Burst[float64]
	got := []int{b.Place(0), b.Place(0), b.Place(0), b.Place(2.5), b.Place(2.5), b.Place(3)}
	if want := []int{0, 1, 2, 0, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("placed %v, want %v", got, want)
	}
}
