package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim/meter"
	"github.com/rubberband-hpo/rubberband/spec"
)

// hedgeByHandCluster is spotByHand's cluster with both markets: one GPU per node, on demand at
// $3.60/h ($0.001/s), spot at $1.80/h ($0.0005/s) whose instances live exactly %s (from the
// stage's start; a replacement's from the end of its SCALE), SCALE 20 s and INIT_INSTANCE 10 s
// (a replacement takes R = 30 s), no minimum charge.
const hedgeByHandCluster = "{gpus_per_node: 1, price_per_hour: 3.6, markets: [on-demand, spot], spot: {price_per_hour: 1.8, lifetimes: {value: %s}, notice: 0s}," +
	" scale_latency: {value: 20s}, init_latency: {value: 10s}, billing: {minimum: 0s}}"

// hedgeByHand simulates one stage on a hedged allocation (GPUs, nodes and on-demand nodes, on
// spot) and checks its JCT, cost and interruptions.
func hedgeByHand(t *testing.T, life, stage string, a StageAlloc, jct, cost, interrupted float64) {
	t.Helper()
	s := job(t, "{stages: ["+stage+"]}", fmt.Sprintf(hedgeByHandCluster, life), spotByHandProfile, 4, 1)
	a.Market = "spot"
	res, err := s.Simulate(Alloc{{a}})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Brackets[0].Stages[0]
	if res.JCT.Mean != jct || res.JCT.Std != 0 || math.Abs(res.Cost.Mean-cost) > 1e-12 || st.Interruptions != interrupted || st.OnDemandNodes != a.OnDemand {
		t.Errorf("JCT %v s (std %v), cost $%v, %v interruptions, %d on demand; by hand %v s, $%v, %v, %d",
			res.JCT.Mean, res.JCT.Std, res.Cost.Mean, st.Interruptions, st.OnDemandNodes, jct, cost, interrupted, a.OnDemand)
	}
	if math.Abs(st.Cost-res.Cost.Mean) > 1e-12 {
		t.Errorf("the stage costs $%v, the run $%v", st.Cost, res.Cost.Mean)
	}
}

// The critical gang on the on-demand tier, the rest interrupted (lifetimes of 25 s). Three
// trials of 30 iterations (a gang: 1 s of start-up and 30 s) on two nodes, node 0 on demand:
// slot 0 runs trials 0 and 2 one after the other (the critical chain, 0-31 s and 31-62 s from
// the stage's start, on demand), slot 1 trial 1 on the spot node. Both nodes are ready at 30 s
// (billed from 20 s). The spot node's life ends at 25 s: trial 1 stops with 6 iterations left;
// the on-demand slot is busy until 31 s, so it waits for a replacement, ready at 55 s, and is done
// at 55 + 1 + 6 = 62 s (the replacement lives until 25 + 20 + 25 = 70 s). The stage ends at 62 s:
// JCT 92 s. Billed: the on-demand node 72 s at $0.001, the spot one 72 s less the replacement's
// SCALE (52 s) at $0.0005. The same stage all on spot has its critical chain interrupted too
// (checked below to be slower and no cheaper per second of hedge).
func TestHedgeCriticalOnDemandByHand(t *testing.T) {
	hedgeByHand(t, "25s", "{trials: 3, iters: 30}", StageAlloc{GPUs: 2, Nodes: 2, OnDemand: 1}, 92, 0.072+0.026, 1)
	// Unhedged, node 0's life ends at 25 s too: trial 0 waits for its replacement (done at
	// 62 s), and trial 2 after it; that replacement's life (70 s) ends during trial 2.
	s := job(t, "{stages: [{trials: 3, iters: 30}]}", fmt.Sprintf(hedgeByHandCluster, "25s"), spotByHandProfile, 4, 1)
	res, err := s.Simulate(Alloc{{{GPUs: 2, Nodes: 2, Market: "spot"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.JCT.Mean <= 92+31 {
		t.Errorf("all on spot: JCT %v s, no later than the hedged stage's critical chain allows", res.JCT.Mean)
	}
}

// An interrupted gang moves to free on-demand room (lifetimes of 20 s). Two trials of 30
// iterations on two nodes, node 0 on demand. The spot node's life ends at 20 s: trial 1 (11
// iterations left) waits for a replacement (the on-demand slot is busy until 31 s), relaunched
// at 50 s, to be done at 62 s. The replacement's life ends at 20 + 20 + 20 = 60 s, 9 iterations
// in: the on-demand slot has been free since 31 s, so the gang moves there at once instead of
// waiting 30 s for another replacement, and is done at 60 + 1 + 2 = 63 s. The lost spot node is
// not replaced, nor billed once lost. JCT 30 + 63 = 93 s; two interruptions; billed 73 s on
// demand, 73 s less one SCALE and the 3 s lost on spot (50 s). Without the move the
// gang would be done at 60 + 30 + 1 + 2 = 93 s.
func TestHedgeMoveToOnDemandByHand(t *testing.T) {
	hedgeByHand(t, "20s", "{trials: 2, iters: 30}", StageAlloc{GPUs: 2, Nodes: 2, OnDemand: 1}, 93, 0.073+0.025, 2)
}

// Hedging changes nothing but prices where nothing is interrupted: at lifetimes longer than the
// stage, a hedged stage takes what the all-spot one takes, and costs its on-demand nodes' share
// more.
func TestHedgeWithoutInterruptionsIsAPrice(t *testing.T) {
	for _, od := range []int{0, 1, 2, 3} {
		s := job(t, "{stages: [{trials: 4, iters: 30}]}", fmt.Sprintf(hedgeByHandCluster, "1h"), spotByHandProfile, 4, 1)
		res, err := s.Simulate(Alloc{{{GPUs: 4, Nodes: 4, Market: "spot", OnDemand: od}}})
		if err != nil {
			t.Fatal(err)
		}
		// Ready at 30 s, one gang of 31 s per node, billed from 20 s: 41 s a node.
		want := 41 * (0.001*float64(od) + 0.0005*float64(4-od))
		if res.JCT.Mean != 61 || math.Abs(res.Cost.Mean-want) > 1e-12 || res.Brackets[0].Stages[0].Interruptions != 0 {
			t.Errorf("%d on demand: JCT %v, cost $%v (by hand 61 s, $%v)", od, res.JCT.Mean, res.Cost.Mean, want)
		}
	}
}

// Stages keep their nodes market by market: a hedged stage after an all-spot one keeps spot
// nodes and starts its on-demand ones; an on-demand stage after a hedged one keeps the on-demand
// nodes and releases the spot ones at the SYNC.
func TestHedgeKeepsNodesByMarket(t *testing.T) {
	s := job(t, "{stages: [{trials: 4, iters: 30}, {trials: 2, iters: 30}, {trials: 1, iters: 30}]}", fmt.Sprintf(hedgeByHandCluster, "1h"), spotByHandProfile, 4, 1)
	a := Alloc{{{GPUs: 4, Nodes: 4, Market: "spot"}, {GPUs: 2, Nodes: 2, Market: "spot", OnDemand: 1}, {GPUs: 1, Nodes: 1, Market: "on-demand"}}}
	res, err := s.Simulate(a)
	if err != nil {
		t.Fatal(err)
	}
	var added []int
	for _, st := range res.Brackets[0].Stages {
		added = append(added, st.NewNodes)
	}
	// Stage 1: 30 s to start 4 spot nodes, 31 s. Stage 2 keeps one spot node, starts one on
	// demand (30 s), 31 s. Stage 3 keeps that one: 31 s. 4 spot nodes from 20 s: three until
	// 61 s, one until 122 s; the on-demand one from 81 s to 153 s.
	want := 0.0005*(3*41+102) + 0.001*72
	if fmt.Sprint(added) != "[4 1 0]" || res.JCT.Mean != 153 || math.Abs(res.Cost.Mean-want) > 1e-12 {
		t.Errorf("new nodes %v, JCT %v s, cost $%v; by hand [4 1 0], 153 s, $%v", added, res.JCT.Mean, res.Cost.Mean, want)
	}
	dag, err := BuildDAG(s.Model(), s.Brackets(), a)
	if err != nil {
		t.Fatal(err)
	}
	scales := 0
	for _, n := range dag.Nodes {
		if n.Kind == Scale {
			scales++
		}
	}
	if scales != 2 {
		t.Errorf("the DAG scales up %d times, by hand 2 (stage 3 keeps its node)", scales)
	}
}

// Check refuses on-demand nodes where they make no sense, and FormatStages and ParseAlloc write
// and read them.
func TestHedgeCheckAndFormat(t *testing.T) {
	s := job(t, "{stages: [{trials: 4, iters: 3}]}", fmt.Sprintf(hedgeByHandCluster, "1h"), spotByHandProfile, 4, 1)
	onlySpot := job(t, "{stages: [{trials: 4, iters: 3}]}", strings.Replace(fmt.Sprintf(hedgeByHandCluster, "1h"), "markets: [on-demand, spot]", "market: spot", 1), spotByHandProfile, 4, 1)
	for _, tc := range []struct {
		s    *Simulator
		a    StageAlloc
		want string
	}{
		{s, StageAlloc{GPUs: 4, Nodes: 4, Market: "spot", OnDemand: 2}, ""},
		{s, StageAlloc{GPUs: 4, Nodes: 4, Market: "spot", OnDemand: 4}, "keeps at least one spot node"},
		{s, StageAlloc{GPUs: 4, Nodes: 4, Market: "spot", OnDemand: -1}, "need 0 or more"},
		{s, StageAlloc{GPUs: 4, Nodes: 4, Market: "on-demand", OnDemand: 1}, "only a spot stage"},
		{onlySpot, StageAlloc{GPUs: 4, Nodes: 4, OnDemand: 1}, "does not offer on demand"},
	} {
		err := tc.s.Model().Check(tc.s.Brackets(), Alloc{{tc.a}})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.a, err, tc.want)
		}
	}
	a := []StageAlloc{{GPUs: 4, Nodes: 4, Market: "spot", OnDemand: 2}, {GPUs: 2, Nodes: 2}}
	if got := FormatStages(a); got != "[4@:spot+2od 2]" {
		t.Errorf("FormatStages: %s", got)
	}
	back, err := ParseAlloc(s.Model(), "4@:spot+2od")
	if err != nil || back[0][0] != a[0] {
		t.Errorf("ParseAlloc: %+v, %v", back, err)
	}
	if _, err := ParseAlloc(s.Model(), "4@:spot+2"); err == nil {
		t.Error("ParseAlloc took +2 without od")
	}
}

// Standby room on the on-demand tier (lifetimes of 25 s): a hedged stage whose nodes are more
// than its GPUs need keeps the spare ones on demand, empty, for interrupted gangs. Two trials
// of 30 iterations on two spot nodes; both lives end at 25 s, 6 iterations before the end.
//   - Two standby nodes (4 nodes, 2 on demand): both gangs move at once, done at 25 + 1 + 6 =
//     32 s. JCT 62 s; no replacement; 4 nodes billed 42 s each, 2 on demand, 2 on spot less
//     the 7 s each after its loss.
//   - One (3 nodes, 1 on demand): the first gang (node 1's) moves, done at 32 s; the second
//     waits for a replacement, done at 25 + 30 + 1 + 6 = 62 s. JCT 92 s; billed 72 s each, less
//     the replacement's SCALE (20 s) and the 37 s after the first spot node's loss.
func TestHedgeStandbyRoomByHand(t *testing.T) {
	t.Run("two", func(t *testing.T) {
		hedgeByHand(t, "25s", "{trials: 2, iters: 30}", StageAlloc{GPUs: 2, Nodes: 4, OnDemand: 2}, 62, 2*42*0.001+2*35*0.0005, 2)
	})
	t.Run("one", func(t *testing.T) {
		hedgeByHand(t, "25s", "{trials: 2, iters: 30}", StageAlloc{GPUs: 2, Nodes: 3, OnDemand: 1}, 92, 72*0.001+(2*72-20-37)*0.0005, 2)
	})
}

// On hedged plans too, in every sample the meter's stage costs add up to the cost the planners'
// hot path computes, and its last SYNC is the JCT: the two walks keep nodes market by market
// alike (hedged stages beside spot and on-demand ones, standby room, shrinking and growing).
func TestHedgeBreakdownAddsUpPerSample(t *testing.T) {
	const samples = 50
	cluster := "{gpus_per_node: 4, price_per_hour: 12, markets: [on-demand, spot], spot: {price_per_hour: 4, interruptions_per_hour: 20}," +
		" scale_latency: {dist: normal, mean: 20s, std: 3s}, init_latency: {value: 10s}, network_gbps: 10, data: {size_gb: 1, price_per_gb: 0.1}}"
	profile := "{iter_latency: {1: {dist: normal, mean: 20, std: 2}, 4: {dist: normal, mean: 6, std: 0.6}, 8: {dist: normal, mean: 4, std: 0.4}}, startup_latency: {value: 2s}}"
	s := job(t, "{stages: [{trials: 8, iters: 3}, {trials: 4, iters: 6}, {trials: 2, iters: 12}, {trials: 1, iters: 20}]}", cluster, profile, samples, 9)
	const spot, od = "spot", "on-demand"
	for name, a := range map[string]Alloc{
		"hedged throughout":         {{{GPUs: 32, Nodes: 10, Market: spot, OnDemand: 2}, {GPUs: 16, Nodes: 5, Market: spot, OnDemand: 2}, {GPUs: 8, Nodes: 3, Market: spot, OnDemand: 2}, {GPUs: 8, Nodes: 2, Market: od}}},
		"spot, hedged, spot":        {{{GPUs: 8, Nodes: 2, Market: spot}, {GPUs: 16, Nodes: 6, Market: spot, OnDemand: 3}, {GPUs: 8, Nodes: 2, Market: spot}, {GPUs: 4, Nodes: 2, Market: spot, OnDemand: 1}}},
		"on demand, hedged":         {{{GPUs: 32, Nodes: 8, Market: od}, {GPUs: 4, Nodes: 3, Market: spot, OnDemand: 2}, {GPUs: 8, Nodes: 4, Market: spot, OnDemand: 1}, {GPUs: 8, Nodes: 2, Market: od}}},
		"waves, critical on demand": {{{GPUs: 3, Nodes: 1, Market: spot}, {GPUs: 2, Nodes: 2, Market: spot, OnDemand: 1}, {GPUs: 2, Nodes: 2, Market: spot, OnDemand: 1}, {GPUs: 1, Nodes: 1, Market: od}}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := s.Model().Check(s.Brackets(), a); err != nil {
				t.Fatal(err)
			}
			var tl timeline
			plans := s.stagePlans(0, a[0])
			hits := 0.0
			for i := range samples {
				jct, cost := s.sampleBracket(plans, i)
				s.layout(0, plans, nil, i, &tl)
				bill, err := meter.Bill(s.Model().Rules, tl.nodes, tl.launches, tl.windows)
				if err != nil {
					t.Fatal(err)
				}
				sum := 0.0
				for k := range plans {
					sum += bill.Stages[meter.StageKey{Bracket: 0, Stage: k}] + tl.versions[k].spotCostAt(i)
					if v := tl.versions[k]; v.interrupted != nil {
						hits += v.interrupted[i]
					}
				}
				if last := tl.windows[len(tl.windows)-1].Sync; !relNear(sum, cost) || last != jct {
					t.Fatalf("sample %d: stages add up to %v, hot path %v; last sync %v, JCT %v", i, sum, cost, last, jct)
				}
			}
			if hits == 0 {
				t.Error("no interruption in any sample: the test tests nothing")
			}
		})
	}
}

// A hedged stage trains through the notice where no on-demand room is free
// (TestHedgeMoveToOnDemandByHand's stage with a notice of 5 s). The spot node's notice comes at
// 20 s, the on-demand slot busy until 31 s: the replacement is asked for at once, and trial 1
// trains on until its node goes at 25 s, then relaunches on the replacement at 50 s: 1 s of
// start-up and the 6 iterations left, done at 57 s (the replacement lives to 60 s): JCT 87 s,
// one interruption. Billed: 67 s on demand; on spot 20-55 s and the replacement 70-87 s (52 s).
func TestHedgeTrainThroughByHand(t *testing.T) {
	s := job(t, "{stages: [{trials: 2, iters: 30}]}", strings.Replace(fmt.Sprintf(hedgeByHandCluster, "20s"), "notice: 0s", "notice: 5s", 1), spotByHandProfile, 4, 1)
	res, err := s.Simulate(Alloc{{{GPUs: 2, Nodes: 2, OnDemand: 1, Market: "spot"}}})
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Brackets[0].Stages[0]; res.JCT.Mean != 87 || math.Abs(res.Cost.Mean-(0.067+0.026)) > 1e-12 || st.Interruptions != 1 {
		t.Errorf("JCT %v s, cost $%v, %v interruptions; by hand 87 s, $0.093, 1", res.JCT.Mean, res.Cost.Mean, st.Interruptions)
	}
}

// Spare spot nodes are standby room too, after the on-demand room (laid out by hand: a hedged
// stage of 2 trials of 30 iterations on 4 nodes, node 0 on demand and spare, the slots on spot
// nodes 1 and 2, node 3 spot and spare). Node 1 is interrupted at 20 s: its gang moves to the
// on-demand room (1 s of start-up and its 11 iterations left: done at 32 s). Node 2 at 25 s:
// the on-demand room is taken, node 3's is free: its gang moves there (done at 25 + 1 + 6 =
// 32 s) instead of waiting 30 s for a replacement (62 s). Nothing is replaced.
func TestSpareSpotNodesAreStandbyRoom(t *testing.T) {
	_, m := parseJob(t, "{stages: [{trials: 2, iters: 30}]}", fmt.Sprintf(hedgeByHandCluster, "1h"), spotByHandProfile)
	a := StageAlloc{GPUs: 2, Nodes: 4, OnDemand: 1, Market: "spot"}
	oi, ok := m.OfferIndex(a)
	if !ok {
		t.Fatal("no spot offer")
	}
	o := m.Offers[oi]
	g := &DAG{}
	g.addTrain(oi, 0, 0, spec.Stage{Trials: 2, Iters: 30}, a, nil, false)
	finish, latency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	r := rand.New(rand.NewPCG(1, 2))
	end := g.CriticalPath(m, r, finish, latency)
	l := o.newSpotLayout(g, a.Nodes, 1, a.OnDemand)
	copy(l.first, []float64{math.Inf(1), 20, 25, math.Inf(1)})
	got, hit := o.interrupt(l, g, r, end, finish, latency, -1)
	if end != 31 || got != 32 || hit.count != 0 || hit.moved != 2 {
		t.Fatalf("stage end %v (calm %v), %d replaced, %d moved; by hand 32 (31), 0, 2", got, end, hit.count, hit.moved)
	}
}
