package sim

import (
	"fmt"
	"math"
	"testing"
)

// One trial of constant length on one spot node, interrupted at 36 an hour (λ = 0.01/s), worked
// out by hand. Start-up S = 10 s, work W = 100 iterations of 1 s, a replacement R = SCALE 20 s +
// INIT 10 s; the first node's own SCALE and INIT (30 s) come first. Price $3.60/h = $0.001/s,
// billed to the second, each node from the end of its SCALE.
func TestSpotInterruptionsWorkedByHand(t *testing.T) {
	const (
		lambda, S, W, R, scale, first = 0.01, 10.0, 100.0, 30.0, 20.0, 30.0
		samples                       = 40000
	)
	cluster := "{gpus_per_node: 1, price_per_hour: 3.6, market: spot, spot: {price_per_hour: 3.6, interruptions_per_hour: 36, on_notice: %s}," +
		" scale_latency: {value: 20s}, init_latency: {value: 10s}, billing: {minimum: 0s}}"
	profile := "{iter_latency: {1: {dist: constant, value: 1}}, startup_latency: {value: 10s}}"
	// A restart from scratch with exponential interruptions and downtime R takes
	// (1/λ + R)(e^{λL} - 1) on average, L = S + W, with e^{λL} - 1 interruptions.
	restartK := math.Expm1(lambda * (S + W))
	restartT := (1/lambda + R) * restartK
	// Checkpointing within the notice: a start-up is redone whole when cut (a restart of
	// length S, A = (1/λ + R)(e^{λS} - 1) on average with e^{λS} - 1 interruptions); the work is
	// cut λW times on average, each costing R and a start-up again.
	a := (1/lambda + R) * math.Expm1(lambda*S)
	checkpointK := math.Expm1(lambda*S)*(1+lambda*W) + lambda*W
	checkpointT := a + W + lambda*W*(R+a)
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
	spot := job(t, "{stages: [{trials: 2, iters: 100}]}", fmt.Sprintf(base, ", market: spot, spot: {price_per_hour: 3.6, interruptions_per_hour: 36}"), profile, 2000, 3)
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
