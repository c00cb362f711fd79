package planner

import (
	"os"
	"strconv"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// hedgeFigures are issue 25's figures for examples/paper/table2-spot.yaml with both markets.
type hedgeFigures struct {
	hedged, onDemand, spot Result // the plans: with hedges, on demand only, spot only
	// On fresh draws (evalSamples of them, another seed than the planner's): each plan's P(miss)
	// and mean cost.
	hedgedMiss, hedgedCost, onDemandMiss, onDemandCost float64
}

// table2Hedge loads examples/paper/table2-spot.yaml offered in both markets with hedging on, at
// rate interruptions an hour and the deadline at quantile; RB_HEDGE_SAMPLES, when set, is how
// many samples the planners draw (the spec's 100 otherwise).
func table2Hedge(t testing.TB, rate, quantile float64) *spec.Experiment {
	t.Helper()
	exp, err := spec.Load("../examples/paper/table2-spot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exp.Cluster.Markets = []string{spec.MarketOnDemand, spec.MarketSpot}
	exp.Cluster.Hedge = true
	exp.Cluster.Spot.InterruptionsPerHour = rate
	exp.Planner.DeadlineQuantile = quantile
	if s := os.Getenv("RB_HEDGE_SAMPLES"); s != "" {
		exp.Planner.Samples, _ = strconv.Atoi(s)
	}
	return exp
}

// planHedge plans exp with the named planner at 100 samples, beside on demand only and spot only
// on the same draws, and predicts the hedged and on-demand plans on evalSamples fresh draws.
func planHedge(t testing.TB, exp *spec.Experiment, name string, evalSamples int) hedgeFigures {
	t.Helper()
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	brackets := exp.Algorithm.Brackets()
	p, err := NewProblem(sim.New(m, brackets, exp.Planner.Samples, exp.Seed), exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
	if err != nil {
		t.Fatal(err)
	}
	var f hedgeFigures
	market := func(name string) []int {
		return OffersWhere(m, func(o *sim.Offer) bool { return o.Market == name })
	}
	for _, x := range []struct {
		res    *Result
		offers []int
	}{{&f.hedged, nil}, {&f.onDemand, market(spec.MarketOnDemand)}, {&f.spot, market(spec.MarketSpot)}} {
		q := p
		if x.offers != nil {
			q = p.Restrict(x.offers)
		}
		if *x.res, err = Run(q, name); err != nil {
			t.Fatal(err)
		}
	}
	eval := sim.New(m, brackets, evalSamples, exp.Seed+1000)
	for _, x := range []struct {
		res        Result
		miss, cost *float64
	}{{f.hedged, &f.hedgedMiss, &f.hedgedCost}, {f.onDemand, &f.onDemandMiss, &f.onDemandCost}} {
		out, err := eval.Simulate(x.res.Best.Alloc)
		if err != nil {
			t.Fatal(err)
		}
		*x.miss, *x.cost = sim.MissProb(out.Outcome.JCT, exp.Deadline.Seconds()), out.Cost.Mean
	}
	return f
}

// Issue 25's figures at 5 interruptions an hour, p90 (the deadline 20 minutes), where a notice
// ends its node's gangs at once (notice 0: no runtime passes it on): no plan all on spot meets
// the deadline; the hedged plan does, holds hedged stages, and, on 1,000 fresh draws, still meets
// it at p90 (P(miss) at most 10%, with 5 points for planning on 100 draws) for less than the
// best on-demand plan's cost. (Issue 25 asked 0.75 of it; the model reached 0.775 while it kept
// the iteration under way at an interruption. A trainer's checkpoint is an iteration's end, and
// the first stage's trials are one iteration long: a cut loses the whole launch, and the hedged
// plan costs 0.92 to 0.95 of the on-demand one.)
//
// With EC2's 2-minute notice, trained through (issue 42), the plan the planners find costs at
// most 0.75 of the on-demand plan's and meets the deadline at p90 on 1,000 fresh draws; it is all
// on spot: training through the notice takes the replacement's latency off most interruptions.
func TestHedgedTable2SpotAtFivePerHour(t *testing.T) {
	if testing.Short() {
		t.Skip("plans table2-spot three times and predicts on 1,000 draws")
	}
	for _, name := range []string{spec.PlannerGreedy, spec.PlannerOptimal} {
		t.Run(name+", notice ends the gangs", func(t *testing.T) {
			if name == spec.PlannerOptimal {
				t.Skip("held on the greedy plan only: the optimal planner takes ten times as long under -race (by hand: 0.923 of on demand, P(miss) 13.1%)")
			}
			exp := table2Hedge(t, 5, 0.9)
			exp.Cluster.Spot.Notice = 0
			f := planHedge(t, exp, name, 1000)
			if f.spot.Feasible {
				t.Errorf("a plan all on spot meets the deadline: %v", f.spot.Best.Alloc)
			}
			if !f.hedged.Feasible || !f.onDemand.Feasible || !hedged(f.hedged.Best.Alloc) {
				t.Fatalf("hedged plan %v (feasible %v), on demand feasible %v", f.hedged.Best.Alloc, f.hedged.Feasible, f.onDemand.Feasible)
			}
			ratio := f.hedgedCost / f.onDemandCost
			t.Logf("%s: hedged %v: $%.2f, P(miss) %.1f%% on 1,000 draws; on demand $%.2f (P(miss) %.1f%%): %.3f of its cost; fastest all-spot p90 %.0f s",
				name, f.hedged.Best.Alloc, f.hedgedCost, 100*f.hedgedMiss, f.onDemandCost, 100*f.onDemandMiss, ratio, f.spot.Best.JCT)
			if f.hedgedMiss > 0.15 || ratio >= 1 {
				t.Errorf("hedged plan: P(miss) %.3f, %.3f of the on-demand plan's cost", f.hedgedMiss, ratio)
			}
		})
		t.Run(name+", trained through", func(t *testing.T) {
			f := planHedge(t, table2Hedge(t, 5, 0.9), name, 1000)
			if !f.hedged.Feasible || !f.onDemand.Feasible {
				t.Fatalf("plan %v (feasible %v), on demand feasible %v", f.hedged.Best.Alloc, f.hedged.Feasible, f.onDemand.Feasible)
			}
			ratio := f.hedgedCost / f.onDemandCost
			t.Logf("%s: %v: $%.2f, P(miss) %.1f%% on 1,000 draws; on demand $%.2f (P(miss) %.1f%%): %.3f of its cost",
				name, f.hedged.Best.Alloc, f.hedgedCost, 100*f.hedgedMiss, f.onDemandCost, 100*f.onDemandMiss, ratio)
			if f.hedgedMiss > 0.12 || ratio > 0.75 {
				t.Errorf("plan: P(miss) %.3f, %.3f of the on-demand plan's cost", f.hedgedMiss, ratio)
			}
		})
	}
}

// At the example's own rate (0.1 an hour) the plan the planners find with hedges allowed is never
// dearer than the plan all on spot (the same draws).
func TestHedgedTable2SpotAtOwnRate(t *testing.T) {
	for _, name := range []string{spec.PlannerGreedy, spec.PlannerOptimal} {
		f := planHedge(t, table2Hedge(t, 0.1, 0.5), name, 100)
		if !f.spot.Feasible || !f.hedged.Feasible || f.hedged.Best.Cost > f.spot.Best.Cost+1e-9 {
			t.Errorf("%s: with hedges $%.4f (feasible %v), all on spot $%.4f (feasible %v)",
				name, f.hedged.Best.Cost, f.hedged.Feasible, f.spot.Best.Cost, f.spot.Feasible)
		}
	}
}

// Hedges are weighed only where the spec allows them, both markets are allowed and the spot
// stage expects interruptions; each keeps a spot node, holds its on-demand nodes first and fits
// max_nodes; greedy's step down keeps a hedged stage's shape.
func TestHedgesWhereAllowed(t *testing.T) {
	exp := table2Hedge(t, 5, 0.9)
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), 100, exp.Seed), exp.Deadline.Seconds(), 0.9)
	if err != nil {
		t.Fatal(err)
	}
	spot, _ := m.OfferIndex(sim.StageAlloc{Market: spec.MarketSpot})
	od, _ := m.OnDemandOf(spot)
	all := []int{0, 1}
	if !p.hedgeable(spot, all) || p.hedgeable(od, all) || p.hedgeable(spot, []int{spot}) {
		t.Fatalf("hedgeable: spot %v, on demand %v, spot alone %v", p.hedgeable(spot, all), p.hedgeable(od, all), p.hedgeable(spot, []int{spot}))
	}
	// Stage 3: 3 trials on 24 GPUs (a gang of 8 GPUs spans 2 nodes).
	hs := p.hedges(0, 2, 24, spot)
	if len(hs) == 0 {
		t.Fatal("no hedge of stage 3 at 24 GPUs")
	}
	for _, h := range hs {
		if o, _ := m.OfferIndex(h); h.OnDemand < 1 || h.OnDemand >= h.Nodes || h.Nodes > 6+4 || o != spot {
			t.Errorf("hedge %+v", h)
		}
		if err := m.Check(exp.Algorithm.Brackets(), sim.Alloc{{{GPUs: 64, Nodes: 16}, {GPUs: 40, Nodes: 10}, h, {GPUs: 16, Nodes: 4}}}); err != nil {
			t.Errorf("hedge %+v: %v", h, err)
		}
	}
	down := p.reshape(sim.StageAlloc{GPUs: 24, Nodes: 8, OnDemand: 4}, 12, spot)
	if down != (sim.StageAlloc{GPUs: 12, Nodes: 5, OnDemand: 4}) {
		t.Errorf("24 GPUs on 8 nodes, 4 on demand (2 standby), stepped down to 12: %+v", down)
	}
	m.Hedge = false
	if p.hedgeable(spot, all) {
		t.Error("hedgeable with cluster.hedge off")
	}
}

// BenchmarkHedgeTable2Spot plans table2-spot at 5 interruptions an hour, p90, with hedges (the
// optimal planner, 100 samples, or RB_HEDGE_SAMPLES), and reports the hedged plan's cost against
// the best on-demand plan's and its P(miss), both on 1,000 fresh draws.
func BenchmarkHedgeTable2Spot(b *testing.B) {
	exp := table2Hedge(b, 5, 0.9)
	var f hedgeFigures
	for b.Loop() {
		f = planHedge(b, exp, spec.PlannerOptimal, 1000)
	}
	b.ReportMetric(f.hedgedCost/f.onDemandCost, "cost/on-demand")
	b.ReportMetric(f.hedgedMiss, "P(miss)")
	b.ReportMetric(f.hedgedCost, "$")
}
