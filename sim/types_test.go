package sim

import (
	"math"
	"testing"
)

// A stage on another instance type or market than the nodes held releases them all at the
// previous SYNC and starts its own, each node billed at its own price; worked by hand with
// constant latencies. Two types: "small" (1 GPU, $3.60/h = $0.001/s on demand, $0.0005/s spot,
// SCALE 20 s + INIT 10 s) and "big" (2 GPUs, $0.002/s, SCALE 30 s + INIT 10 s). An iteration takes
// 1 s on 1 GPU and 0.5 s on 2 of big; start-up 5 s. Stage 0 trains 2 trials x 10 iterations,
// stage 1 one trial x 20. Billing per second from the end of each node's SCALE, no minimum.
func TestTypeChangeWorkedByHand(t *testing.T) {
	const cluster = `{instance_types: [{instance_type: small, gpus_per_node: 1, price_per_hour: 3.6, spot_price_per_hour: 1.8},
 {instance_type: big, gpus_per_node: 2, price_per_hour: 7.2, spot_price_per_hour: 3.6, scale_latency: {value: 30s},
  profile: {iter_latency: {1: {dist: constant, value: 1}, 2: {dist: constant, value: 0.5}}, startup_latency: {value: 5s}}}],
 markets: [on-demand, spot], scale_latency: {value: 20s}, init_latency: {value: 10s}, billing: {minimum: 0s}}`
	const profile = "{iter_latency: {1: {dist: constant, value: 1}}, startup_latency: {value: 5s}}"
	small, big := StageAlloc{GPUs: 2, Nodes: 2}, StageAlloc{GPUs: 2, Nodes: 1, Type: "big", Market: "on-demand"}
	for _, tc := range []struct {
		name      string
		held      []Held
		stages    []StageAlloc
		jct, cost float64
		newNodes  []int
	}{
		// Stage 0: both small nodes ready at 30 s (billed from 20 s), train 15 s, SYNC at 45 s;
		// one goes (25 s billed); the other trains 5 + 20 s: 50 s billed, end at 70 s.
		{"same type", nil, []StageAlloc{small, {GPUs: 1, Nodes: 1}}, 70, 0.001 * (25 + 50), []int{2, 0}},
		// Both small nodes go at 45 s (25 s billed each); a big one starts: ready at 45 + 40 = 85 s,
		// billed from 75 s; trains 5 + 20 x 0.5 = 15 s: SYNC at 100 s, 25 s billed at $0.002/s.
		{"type change", nil, []StageAlloc{small, big}, 100, 0.001*2*25 + 0.002*25, []int{2, 1}},
		// The same type on spot: both on-demand nodes go at 45 s; a spot one is ready at 75 s,
		// billed from 65 s at $0.0005/s; trains 25 s: 35 s billed.
		{"market change", nil, []StageAlloc{small, {GPUs: 1, Nodes: 1, Type: "small", Market: "spot"}}, 100, 0.001*2*25 + 0.0005*35, []int{2, 1}},
		// A big node held at the start goes at once (nothing billed): the plan runs as with none.
		{"held of another type", []Held{{Nodes: 1, Type: "big", Market: "on-demand"}}, []StageAlloc{small, {GPUs: 1, Nodes: 1}}, 70, 0.001 * (25 + 50), []int{2, 0}},
		// A big node held, both stages on big: no start-up at all; stage 0 runs its two trials on
		// one GPU each (5 + 10 s), stage 1 on two (5 + 10 s): 30 s at $0.002/s.
		{"held of its type", []Held{{Nodes: 1, Type: "big"}}, []StageAlloc{big, big}, 30, 0.002 * 30, []int{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := job(t, "{stages: [{trials: 2, iters: 10}, {trials: 1, iters: 20}]}", cluster, profile, 20, 3)
			if tc.held != nil {
				if err := s.HoldNodes(tc.held); err != nil {
					t.Fatal(err)
				}
			}
			a := Alloc{tc.stages}
			res, err := s.Simulate(a)
			if err != nil {
				t.Fatal(err)
			}
			ev := s.Evaluate(a)
			if math.Abs(res.JCT.Mean-tc.jct) > 1e-9 || math.Abs(res.Cost.Mean-tc.cost) > 1e-9 || math.Abs(mean(ev.Cost)-tc.cost) > 1e-9 || math.Abs(mean(ev.JCT)-tc.jct) > 1e-9 {
				t.Fatalf("JCT %v s (by hand %v), cost $%v and $%v evaluated (by hand $%v)", res.JCT.Mean, tc.jct, res.Cost.Mean, mean(ev.Cost), tc.cost)
			}
			stages := res.Brackets[0].Stages
			sum := 0.0
			for k, st := range stages {
				sum += st.Cost
				if st.NewNodes != tc.newNodes[k] {
					t.Errorf("stage %d starts %d nodes, by hand %d", k, st.NewNodes, tc.newNodes[k])
				}
			}
			if math.Abs(sum-tc.cost) > 1e-9 {
				t.Errorf("stage costs add up to $%v, the run costs $%v", sum, tc.cost)
			}
			if want := tc.stages[1].Type; want != "" && stages[1].Type != want {
				t.Errorf("stage 1 reports type %q, want %q", stages[1].Type, want)
			}
		})
	}
}

// The DAG of a type change: the new type's SCALE and INIT_INSTANCE come after the previous SYNC
// and run on the new offer; a stage of the same type and fewer nodes starts nothing.
func TestTypeChangeDAG(t *testing.T) {
	const cluster = `{instance_types: [{instance_type: p3.2xlarge}, {instance_type: p3.8xlarge}], max_nodes: 8}`
	s := job(t, "{stages: [{trials: 4, iters: 1}, {trials: 2, iters: 1}, {trials: 1, iters: 1}]}", cluster, "{iter_latency: {1: {mean: 1}, 4: {mean: 0.3}}}", 5, 1)
	m := s.Model()
	a := Alloc{{{GPUs: 4, Nodes: 4}, {GPUs: 2, Nodes: 2}, {GPUs: 4, Nodes: 1, Type: "p3.8xlarge", Market: "on-demand"}}}
	g, err := BuildDAG(m, s.Brackets(), a)
	if err != nil {
		t.Fatal(err)
	}
	scales := map[int]int{}
	for _, n := range g.Nodes {
		if n.Kind == Scale {
			scales[n.Stage] = n.Offer
		}
	}
	want, _ := m.OfferIndex(a[0][2])
	if len(scales) != 2 || scales[0] != 0 || scales[2] != want || want == 0 {
		t.Fatalf("SCALE nodes by stage (offer): %v, want stage 0 (offer 0) and stage 2 (offer %d)", scales, want)
	}
	if err := m.Check(s.Brackets(), Alloc{{{GPUs: 4, Nodes: 4}, {GPUs: 2, Nodes: 2}, {GPUs: 1, Nodes: 1, Type: "p4d.24xlarge"}}}); err == nil {
		t.Fatal("a stage on a type the spec does not offer passed Check")
	}
	if err := s.HoldNodes([]Held{{Nodes: 1, Type: "p3.16xlarge"}}); err == nil {
		t.Fatal("HoldNodes took nodes of a type the spec does not offer")
	}
}
