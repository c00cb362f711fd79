package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/spec"
)

// One trial of constant length on one spot node, interrupted at 36 an hour (λ = 0.01/s), worked
// out by hand. Start-up S = 10 s, work W = 100 iterations of 1 s, a replacement R = SCALE 20 s +
// INIT 10 s; the first node's own SCALE and INIT (30 s) come first. Price $3.60/h = $0.001/s,
// billed to the second, each node from the end of its SCALE.
//
// A node can be interrupted from the end of its SCALE on. One lost during its INIT (probability
// 1 - q, q = e^{-λ INIT}) is found lost when its gang is launched, once it is ready, and
// replaced: a replacement takes D = R/q on average (1/q tries of R each), each try an
// interruption whose SCALE is not billed. The first node, too, is lost while it starts with
// probability 1 - q: the trial then starts D later.
func TestSpotInterruptionsWorkedByHand(t *testing.T) {
	const (
		lambda, S, W, R, scale, init, first = 0.01, 10.0, 100.0, 30.0, 20.0, 10.0, 30.0
		samples                             = 40000
	)
	cluster := "{gpus_per_node: 1, price_per_hour: 3.6, market: spot, spot: {price_per_hour: 3.6, interruptions_per_hour: 36, on_notice: %s, notice: 0s}," +
		" scale_latency: {value: 20s}, init_latency: {value: 10s}, billing: {minimum: 0s}}"
	profile := "{iter_latency: {1: {dist: constant, value: 1}}, startup_latency: {value: 10s}}"
	q := math.Exp(-lambda * init)
	D := R / q
	lostFirst := 1 - q // the first node, lost while it starts: D more, 1/q interruptions
	// A restart from scratch with exponential interruptions and downtimes of mean D takes
	// (1/λ + D)(e^{λL} - 1) on average, L = S + W, with e^{λL} - 1 interruptions of the run,
	// each 1/q in all.
	restartK := math.Expm1(lambda*(S+W))/q + lostFirst/q
	restartT := (1/lambda+D)*math.Expm1(lambda*(S+W)) + lostFirst*D
	// Checkpointing within the notice: a start-up is redone whole when cut (a restart of
	// length S, A = (1/λ + D)(e^{λS} - 1) on average with e^{λS} - 1 interruptions); the work is
	// cut λW times on average, each costing D, a start-up again and the iteration under way
	// (the checkpoint is the last iteration's end): half of one, 0.5 s, on average.
	a := (1/lambda + D) * math.Expm1(lambda*S)
	checkpointK := (math.Expm1(lambda*S)*(1+lambda*W)+lambda*W)/q + lostFirst/q
	checkpointT := a + W + lambda*W*(D+a+0.5) + lostFirst*D
	for _, tc := range []struct {
		onNotice string
		jct, k   float64
	}{
		{"checkpoint", checkpointT, checkpointK},
		{"restart", restartT, restartK},
	} {
		t.Run(tc.onNotice, func(t *testing.T) {
			s := job(t, "{stages: [{trials: 1, iters: 100}]}", fmt.Sprintf(cluster, tc.onNotice), profile, samples, 7)
			res, err := s.Simulate(s.Model().Elastic([][]int{{1}}))
			if err != nil {
				t.Fatal(err)
			}
			jct := res.JCT.Mean - first
			k := res.Brackets[0].Stages[0].Interruptions
			// Node-seconds billed: from the first SCALE's end to the end, less each
			// replacement's SCALE.
			cost := 0.001 * (first - scale + tc.jct - tc.k*scale)
			if math.Abs(jct-tc.jct) > 0.005*tc.jct || math.Abs(k-tc.k) > 0.02*tc.k || math.Abs(res.Cost.Mean-cost) > 0.01*cost {
				t.Fatalf("JCT %.2f s after provisioning (by hand %.2f), %.4f interruptions (%.4f), cost $%.5f ($%.5f)",
					jct, tc.jct, k, tc.k, res.Cost.Mean, cost)
			}
			if sum := res.Brackets[0].Stages[0].Cost; math.Abs(sum-res.Cost.Mean) > 1e-9 {
				t.Fatalf("the stage costs $%v, the run $%v", sum, res.Cost.Mean)
			}
			t.Logf("%s: JCT %.2f s (by hand %.2f), %.4f interruptions (%.4f), cost $%.5f ($%.5f)", tc.onNotice, jct, tc.jct, k, tc.k, res.Cost.Mean, cost)
		})
	}
}

// Interruptions hit the gangs on the interrupted node only: on a two-node stage whose nodes
// hold one trial each, the stage waits for the slower of two independent interrupted trials;
// without interruptions (on-demand, or spot at rate 0) the same draws give the plain stage.
func TestSpotOnlyWhereAsked(t *testing.T) {
	const profile = "{iter_latency: {1: {dist: normal, mean: 1, std: 0.1}}, startup_latency: {value: 10s}}"
	base := "{gpus_per_node: 1, price_per_hour: 3.6, scale_latency: {value: 20s}, init_latency: {value: 10s}%s}"
	plain := job(t, "{stages: [{trials: 2, iters: 100}]}", fmt.Sprintf(base, ""), profile, 2000, 3)
	rate0 := job(t, "{stages: [{trials: 2, iters: 100}]}", fmt.Sprintf(base, ", market: spot, spot: {price_per_hour: 3.6}"), profile, 2000, 3)
	spot := job(t, "{stages: [{trials: 2, iters: 100}]}", fmt.Sprintf(base, ", market: spot, spot: {price_per_hour: 3.6, interruptions_per_hour: 36, notice: 0s}"), profile, 2000, 3)
	alloc := [][]int{{2}}
	p, _ := plain.Simulate(plain.Model().Elastic(alloc))
	z, _ := rate0.Simulate(rate0.Model().Elastic(alloc))
	s, _ := spot.Simulate(spot.Model().Elastic(alloc))
	if p.JCT != z.JCT || p.Cost != z.Cost || z.Brackets[0].Stages[0].Interruptions != 0 {
		t.Fatalf("spot without interruptions %+v, on-demand %+v", z.JCT, p.JCT)
	}
	// Two nodes, each hit about 1.2 times during its ~110 s: the stage waits for the slower.
	k := s.Brackets[0].Stages[0].Interruptions
	if k < 2 || k > 2.9 || s.JCT.Mean < p.JCT.Mean+40 || s.JCT.P5 < p.JCT.P5 {
		t.Fatalf("spot: %.2f interruptions, JCT %+v against %+v", k, s.JCT, p.JCT)
	}
}

// Two nodes of one GPU, one trial of 100 s each (start-up 10 s, 90 iterations of 1 s); each
// node is slow with probability p = 0.5, a trial there taking f = 2 times as long. The SYNC
// waits for the slower: 100 s when neither is slow ((1-p)² = 1/4), else 200 s: 175 s on
// average. With every node slow, exactly 200 s.
func TestSlowNodesBarrierWorkedByHand(t *testing.T) {
	const cluster = "{gpus_per_node: 1, price_per_hour: 3.6, scale_latency: {value: 0s}, init_latency: {value: 0s}}"
	for _, tc := range []struct {
		share, want, tol float64
	}{{0.5, 175, 1}, {1, 200, 0}, {0, 100, 0}} {
		profile := fmt.Sprintf("{iter_latency: {1: {dist: constant, value: 1}}, startup_latency: {value: 10s}, slow_nodes: {share: %v, factor: 2}}", tc.share)
		s := job(t, "{stages: [{trials: 2, iters: 90}]}", cluster, profile, 20000, 5)
		res, err := s.Simulate(s.Model().Elastic([][]int{{2}}))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.JCT.Mean-tc.want) > tc.tol {
			t.Errorf("share %v: JCT %.2f s, by hand %v", tc.share, res.JCT.Mean, tc.want)
		}
	}
}

// spotByHand is the cluster of the worked examples below: one GPU per node at $3.60/h
// ($0.001/s, no minimum), SCALE 20 s, INIT_INSTANCE 10 s (a replacement takes R = 30 s), spot
// instances that live exactly 20 s (lifetimes: constant; a node's starts afresh with each stage,
// a new node's at the end of its SCALE), a start-up of 1 s and iterations of 1 s.
const (
	spotByHandCluster = "{gpus_per_node: 1, price_per_hour: 3.6, market: spot, spot: {price_per_hour: 3.6, lifetimes: {value: %s}, notice: 0s}," +
		" scale_latency: {value: 20s}, init_latency: {value: 10s}, billing: {minimum: 0s}}"
	spotByHandProfile = "{iter_latency: {1: {dist: constant, value: 1}}, startup_latency: {value: 1s}}"
)

// spotByHand simulates stages (a YAML list) at allocation gpus on the cluster above with
// lifetimes of life, and checks the JCT, the cost and each stage's interruptions.
func spotByHand(t *testing.T, life, stages string, gpus []int, jct, cost float64, interrupted []float64) {
	t.Helper()
	s := job(t, "{stages: "+stages+"}", fmt.Sprintf(spotByHandCluster, life), spotByHandProfile, 4, 1)
	res, err := s.Simulate(s.Model().Elastic([][]int{gpus}))
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, st := range res.Brackets[0].Stages {
		got = append(got, st.Interruptions)
	}
	if res.JCT.Mean != jct || res.JCT.Std != 0 || math.Abs(res.Cost.Mean-cost) > 1e-12 || fmt.Sprint(got) != fmt.Sprint(interrupted) {
		t.Errorf("JCT %v s (std %v), cost $%v, interruptions %v; by hand %v s, $%v, %v", res.JCT.Mean, res.JCT.Std, res.Cost.Mean, got, jct, cost, interrupted)
	}
}

// A node lost while the stage it is kept for scales up (lifetimes of 25 s). Stage 1: two trials
// of 5 iterations, one after the other on one node: 30 s to provision, two gangs of 1 + 5 s,
// done at 42 s, before its life ends. Stage 2 keeps it and adds a node for its two trials: while
// the new node takes 30 s to start (its own life, 25 s from the end of its SCALE, outlasts its
// 10 s of INIT), the node kept idles and is lost at 25 s. The executor learns of it when it
// launches a gang there, at the stage's start (72 s), and rents a replacement: ready 30 s later,
// its gang done at 72 + 30 + 6 = 108 s. The other gang is done at 78 s; its node's life ends at
// 97 s, idle: a last stage has no use for it. Billed: the first node from 20 s to 108 s less the
// replacement's SCALE (68 s), the second from 62 s (46 s): 114 s at $0.001.
func TestSpotLostScalingUpByHand(t *testing.T) {
	spotByHand(t, "25s", "[{trials: 2, iters: 5}, {trials: 2, iters: 5}]", []int{1, 2}, 108, 0.114, []float64{0, 1})
}

// A node lost idle at a SYNC (lifetimes of 20 s). Stage 1: three trials of 11 iterations on two
// nodes, both ready at 30 s: node 0 runs two gangs (0-12 s, 12-24 s from the stage's start),
// node 1 one (0-12 s). At 20 s both lives end: node 0's second gang, 7 iterations in, stops
// (its checkpoint saved) and goes on on a replacement, ready at 50 s: 1 s of start-up and the 4
// iterations it had left, done at 55 s (the replacement's own life, from 40 s, outlasts it).
// Node 1 idles: nothing notices, and the stage ends at 30 + 55 = 85 s.
//
// Stage 2 keeps both nodes for two trials of 5 iterations: the first gang launched on node 1
// finds it lost, and waits for its replacement: 30 + 6 s, the stage ends at 121 s (the other
// gang is done at 6 s; its node's life ends at 20 s, idle). Billed: each node from 20 s to 121 s
// less one replacement's SCALE: 2 x 81 s at $0.001. Had stage 2 kept one node (one trial on one
// GPU), the lost one would have gone at the SYNC, delaying nothing: 85 + 6 = 91 s, billed node 0
// from 20 s to 91 s less its replacement's SCALE (51 s), node 1 from 20 s to 85 s (65 s).
func TestSpotLostIdleByHand(t *testing.T) {
	t.Run("kept", func(t *testing.T) {
		spotByHand(t, "20s", "[{trials: 3, iters: 11}, {trials: 2, iters: 5}]", []int{2, 2}, 121, 0.162, []float64{1, 1})
	})
	t.Run("released", func(t *testing.T) {
		spotByHand(t, "20s", "[{trials: 3, iters: 11}, {trials: 1, iters: 5}]", []int{2, 1}, 91, 0.116, []float64{1, 0})
	})
}

// A spot market that never interrupts (rate 0) predicts exactly what on-demand nodes at the
// same price do, on every example and test spec, plan shape and billing model: the versions of
// a stage that finds a node lost at its start, and the draws of nodes lost while scaling up,
// are never taken. Both are drawn trial by trial, as spot stages always are.
func TestSpotRateZeroChangesNothing(t *testing.T) {
	const samples = 20
	for _, c := range specCases(t) {
		plain, err := NewModel(c.exp)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		never, _ := NewModel(c.exp)
		for i := range plain.Offers {
			plain.Offers[i].Spot, never.Offers[i].Spot = nil, &Spot{}
		}
		for name, a := range testAllocs(plain, c.brackets) {
			p, n := New(plain, c.brackets, samples, 5), New(never, c.brackets, samples, 5)
			p.DrawTrialByTrial()
			n.DrawTrialByTrial()
			want, err := p.Simulate(a)
			if err != nil {
				t.Fatal(err)
			}
			got, err := n.Simulate(a)
			if err != nil {
				t.Fatal(err)
			}
			same := fmt.Sprint(got.Outcome) == fmt.Sprint(want.Outcome) && len(got.Brackets) == len(want.Brackets)
			for b := range got.Brackets {
				same = same && fmt.Sprint(got.Brackets[b]) == fmt.Sprint(want.Brackets[b])
			}
			if !same {
				t.Errorf("%s, %s: spot at rate 0 predicts %+v, on-demand %+v", c.name, name, got.Brackets, want.Brackets)
			}
		}
	}
}

// Training through the notice, worked out by hand on spotByHand's cluster (a replacement takes
// R = 30 s, SCALE 20 s of it) with a notice. One trial of 50 iterations on one node, ready at
// 30 s (billed from 20 s): its gang would be done at 51 s from the stage's start; the node's
// life ends at 20 s, and the replacement is asked for then, ready at 50 s.
//
//   - notice 40 s: the gang trains on until the replacement is up (50 s), then relaunches
//     there: 1 s of start-up and the 1 iteration left, done at 52 s: JCT 82 s. The doomed node
//     bills until its gang stopped (20 s to 80 s), the replacement from the end of its SCALE
//     (70 s to 82 s): 72 s. Without the notice the gang would have stopped at 20 s and been
//     done at 50 + 1 + 31 = 82 s from the stage's start (JCT 112 s).
//   - notice 5 s, lives of 30 s: the node goes at 35 s, the gang with it (its checkpoint saved);
//     relaunched on the replacement (asked for at 30 s) at 60 s: 1 + 16 s, done at 77 s: JCT
//     107 s; billed 20-65 s and 80-107 s.
//   - 15 iterations, lives of 10 s, notice 40 s: the gang is done at 16 s on the doomed node,
//     before its replacement is up, which the stage still waits for (40 s): JCT 70 s; billed
//     20-46 s and 60-70 s.
func TestTrainThroughTheNoticeByHand(t *testing.T) {
	for _, tc := range []struct {
		name, life, notice, stages string
		jct, billed                float64
	}{
		{"replacement first", "20s", "40s", "[{trials: 1, iters: 50}]", 82, 72},
		{"node goes first", "30s", "5s", "[{trials: 1, iters: 50}]", 107, 72},
		{"done within the notice", "10s", "40s", "[{trials: 1, iters: 15}]", 70, 36},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := job(t, "{stages: "+tc.stages+"}", strings.Replace(fmt.Sprintf(spotByHandCluster, tc.life), "notice: 0s", "notice: "+tc.notice, 1), spotByHandProfile, 4, 1)
			res, err := s.Simulate(s.Model().Elastic([][]int{{1}}))
			if err != nil {
				t.Fatal(err)
			}
			st := res.Brackets[0].Stages[0]
			if res.JCT.Mean != tc.jct || res.JCT.Std != 0 || math.Abs(res.Cost.Mean-tc.billed*0.001) > 1e-12 || st.Interruptions != 1 {
				t.Errorf("JCT %v s (std %v), cost $%v, %v interruptions; by hand %v s, $%v, 1", res.JCT.Mean, res.JCT.Std, res.Cost.Mean, st.Interruptions, tc.jct, tc.billed*0.001)
			}
		})
	}
}

// A node noticed idle is released at its notice (TestSpotLostIdleByHand's "kept" stages with a
// notice of 40 s). Stage 1: at 20 s both nodes' lives end. Node 0's second gang (12-24 s) trains
// on and is done at 24 s on the doomed node; its replacement, asked for at 20 s, is up at 50 s,
// when the stage ends (80 s). Node 1, idle, goes at 20 s. Stage 2 finds node 1 lost at its start
// and waits for a replacement: 30 + 6 s, JCT 116 s; node 0's replacement, idle since 86 s, is
// noticed at 100 s (its life starts again with the stage) and released. Billed: node 0 20-54 s,
// its replacement 70-100 s, node 1 20-50 s, its replacement 100-116 s: 110 s at $0.001.
func TestNoticedIdleByHand(t *testing.T) {
	s := job(t, "{stages: [{trials: 3, iters: 11}, {trials: 2, iters: 5}]}", strings.Replace(fmt.Sprintf(spotByHandCluster, "20s"), "notice: 0s", "notice: 40s", 1), spotByHandProfile, 4, 1)
	res, err := s.Simulate(s.Model().Elastic([][]int{{2, 2}}))
	if err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, st := range res.Brackets[0].Stages {
		got = append(got, st.Interruptions)
	}
	if res.JCT.Mean != 116 || math.Abs(res.Cost.Mean-0.110) > 1e-12 || fmt.Sprint(got) != "[1 1]" {
		t.Errorf("JCT %v s, cost $%v, interruptions %v; by hand 116 s, $0.110, [1 1]", res.JCT.Mean, res.Cost.Mean, got)
	}
}

// A gang on two nodes trains on through both nodes' notices (laid out by hand: one trial of 80
// iterations of 1 s on two one-GPU nodes, spotByHand's cluster with notices of 40 s; the gang
// starts up for 1 s at 0 and would be done at 81 s). Node 0's notice comes at 20 s: its
// replacement is up at 50 s. Node 1's at 25 s, while the gang still trains on both: its
// replacement is up at 55 s, and only then is there room for the whole gang, so the gang trains
// on until its checkpoint at 55 s (54 iterations), both doomed nodes billing until then, and is
// done on the replacements at 55 + 1 + 26 = 82 s. Stopped at 50 s to wait for node 1's
// replacement it would have been done at 87 s. Billed past the notices, less the replacements'
// SCALE: node 0 35 s, node 1 30 s (unbilled: 2 x 20 - 65 = -25 s). With 50 iterations the gang
// is done at 51 s on the doomed nodes, and the stage ends once node 1's replacement is up
// (55 s); billed past the notices node 0 31 s, node 1 26 s (unbilled 40 - 57 = -17 s).
func TestGangTrainsThroughTwoNoticesByHand(t *testing.T) {
	for _, tc := range []struct {
		iters               int
		calm, end, unbilled float64
	}{{80, 81, 82, -25}, {50, 51, 55, -17}} {
		st := spec.Stage{Trials: 1, Iters: tc.iters}
		_, m := parseJob(t, fmt.Sprintf("{stages: [{trials: 1, iters: %d}]}", tc.iters), strings.Replace(fmt.Sprintf(spotByHandCluster, "1h"), "notice: 0s", "notice: 40s", 1),
			"{iter_latency: {1: {dist: constant, value: 1}, 2: {dist: constant, value: 1}}, startup_latency: {value: 1s}}")
		a := StageAlloc{GPUs: 2, Nodes: 2, Market: "spot"}
		oi, ok := m.OfferIndex(a)
		if !ok {
			t.Fatal("no spot offer")
		}
		o := m.Offers[oi]
		g := &DAG{}
		g.addTrain(oi, 0, 0, st, a, nil, false)
		finish, latency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
		r := rand.New(rand.NewPCG(1, 2))
		end := g.CriticalPath(m, r, finish, latency)
		l := o.newSpotLayout(g, a.Nodes, 2, 0)
		copy(l.first, []float64{20, 25})
		got, hit := o.interrupt(l, g, r, end, finish, latency, -1)
		if end != tc.calm || got != tc.end || hit.count != 2 || hit.unbilled != tc.unbilled {
			t.Errorf("%d iterations: stage end %v (calm %v), %d replaced, %v s unbilled; by hand %v (%v), 2, %v", tc.iters, got, end, hit.count, hit.unbilled, tc.end, tc.calm, tc.unbilled)
		}
	}
}
