package executor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// hedgeSpec is shaSpec with both markets: a plan may hedge its spot stages. A replacement takes
// 30 s of SCALE, so that an interrupted gang moves to free on-demand room rather than wait.
var hedgeSpec = strings.Replace(shaSpec, "  scale_latency: {value: 0s}\n",
	"  markets: [on-demand, spot]\n  spot: {discount: 0.7, interruptions_per_hour: 5}\n  scale_latency: {value: 30s}\n", 1)

// hedgedAlloc is a hedged plan of hedgeSpec. Stage 0: 8 trials on 6 slots of one GPU, so slots 0
// and 1 run an extra wave (trials 0, 1, 6 and 7: critical); 4 nodes, 2 on demand: the first
// holds the critical slots, the second is standby room (the GPUs need 3 nodes). Stage 1 keeps
// one on-demand node of them (standby) and the spot ones; stage 2 is spot alone.
func hedgedAlloc() sim.Alloc {
	return sim.Alloc{{
		{GPUs: 6, Nodes: 4, Market: spec.MarketSpot, OnDemand: 2},
		{GPUs: 4, Nodes: 3, Market: spec.MarketSpot, OnDemand: 1},
		{GPUs: 2, Nodes: 1, Market: spec.MarketSpot},
	}}
}

// newHedgeHarness is a harness whose provider rents both markets, running hedgedAlloc.
func newHedgeHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, hedgeSpec)
	h.cfg.Alloc = hedgedAlloc()
	h.provider.Offer = cloud.Offer{Market: cloud.OnDemand, PricePerHour: 3.6}
	h.provider.More = []cloud.Offer{{Market: cloud.Spot, PricePerHour: 3.6 * 0.3}}
	return h
}

// markets is each node's market, from the journal.
func markets(events []journal.Event) map[string]cloud.Market {
	out := map[string]cloud.Market{}
	for _, e := range events {
		if e.Ev == journal.EvNodeUp && e.Node != nil {
			out[e.Node.ID] = e.Node.Market
		}
	}
	return out
}

var criticalTrials = []string{"b0-t0000", "b0-t0001", "b0-t0006", "b0-t0007"}

// A hedged stage runs its critical gangs on its on-demand nodes and the rest on spot; a spot
// node's interruption moves its gangs to the free on-demand room at once (the replacement takes
// 30 s), the critical gangs are never interrupted, the nodes are kept per market from stage to
// stage, and the run ends with a clean run's winner.
func TestHedgedStageMovesInterruptedGangToOnDemand(t *testing.T) {
	clean := newHedgeHarness(t)
	want, cleanEvents, err := clean.run(t, context.Background())
	if err != nil || want.Best == nil {
		t.Fatalf("clean run: %v\n%s", err, clean.log.String())
	}
	m := markets(cleanEvents)
	for _, e := range cleanEvents {
		if e.Ev == journal.EvLaunch && e.Stage == 0 {
			onOD := m[e.Nodes[0]] == cloud.OnDemand
			if slices.Contains(criticalTrials, e.Trial) != onOD {
				t.Errorf("clean run: trial %s (critical: %v) launched on %s node %s", e.Trial, slices.Contains(criticalTrials, e.Trial), m[e.Nodes[0]], e.Nodes[0])
			}
		}
	}

	h := newHedgeHarness(t)
	var doomed string
	var mu sync.Mutex
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		mu.Lock()
		defer mu.Unlock()
		target := g.Workers[0].Env.TargetIter
		if target == 1 && n == 1 && g.Workers[0].Node.Market == cloud.Spot && doomed == "" {
			// The first spot gang's node gets its notice: the gang ends with it, the other on
			// the node is stopped by the driver.
			doomed = g.Workers[0].Node.ID
			return fake.Behavior{Duration: 20 * time.Millisecond, Err: &gang.InterruptedError{Node: doomed, Reason: "spot interruption notice"}}
		}
		return fake.Behavior{Duration: 50 * time.Millisecond}
	}
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("run: %v\n%s", err, h.log.String())
	}
	if res.Best == nil || res.Best.Trial != want.Best.Trial {
		t.Fatalf("best %+v, a clean run's %+v", res.Best, want.Best)
	}
	if doomed == "" {
		t.Fatal("no gang ran on a spot node")
	}
	m = markets(events)
	interrupted := map[string]bool{}
	moved := ""
	for _, e := range events {
		switch {
		case e.Ev == journal.EvFail && e.Interrupted && e.Stage == 0:
			if slices.Contains(criticalTrials, e.Trial) {
				t.Errorf("critical trial %s was interrupted: %s", e.Trial, e.Error)
			}
			interrupted[e.Trial] = true
		case e.Ev == journal.EvLaunch && e.Stage == 0 && slices.Contains(criticalTrials, e.Trial):
			for _, n := range e.Nodes {
				if m[n] != cloud.OnDemand {
					t.Errorf("critical trial %s launched on %s node %s", e.Trial, m[n], n)
				}
			}
		case e.Ev == journal.EvLaunch && e.Stage == 0 && interrupted[e.Trial] && m[e.Nodes[0]] == cloud.OnDemand:
			moved = e.Trial
		}
	}
	if len(interrupted) == 0 || moved == "" {
		t.Fatalf("interrupted %v; moved to on-demand room: %q\n%s", interrupted, moved, h.log.String())
	}
	if !strings.Contains(h.log.String(), "moving its gang to free on-demand room") {
		t.Errorf("the log does not say the gang moved:\n%s", h.log.String())
	}
	// Kept per market: the 2 on-demand nodes stage 0 rented serve stage 1's one (the other goes;
	// it does not stand in for a spot node); the interrupted spot node is not replaced while its
	// gangs run on demand, and stage 1 rents the spot node it lacks.
	byMarket := map[cloud.Market]int{}
	tier := 0
	for _, e := range events {
		if e.Ev == journal.EvNodeUp && e.Node != nil {
			byMarket[e.Node.Market]++
			if e.Tier == spec.MarketOnDemand {
				tier++
			}
		}
	}
	if byMarket[cloud.OnDemand] != 2 || byMarket[cloud.Spot] != 3 || tier != 2 {
		t.Errorf("nodes rented by market: %v (%d journaled on the on-demand tier), want 2 on demand (both on the tier) and 3 spot\n%s", byMarket, tier, h.log.String())
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the run", h.provider.Held())
	}
}

// A hedged stage's driver dies mid-stage (its nodes left held). The resumed driver restores each
// node's market from the journal: it rents nothing anew, relaunches the critical trials still
// to do on the on-demand nodes, relaunches no trial that was done, and ends with a clean run's
// winner.
func TestHedgedStageResumes(t *testing.T) {
	clean := newHedgeHarness(t)
	_, cleanEvents, err := clean.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}

	h := newHedgeHarness(t)
	h.cfg.KeepNodes = true // a dead driver's nodes stay
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		b := fake.Behavior{Duration: 50 * time.Millisecond}
		if g.Trial == "b0-t0006" {
			once.Do(func() {
				cancel() // the second wave of a critical slot has begun: the driver dies
				b.Hang = true
			})
		}
		return b
	}
	_, first, err := h.run(t, ctx)
	if err == nil {
		t.Fatal("the killed run finished")
	}
	if h.provider.Held() != 4 {
		t.Fatalf("%d nodes held after the kill, want the stage's 4", h.provider.Held())
	}
	done := map[string]bool{}
	for _, e := range first {
		if e.Ev == journal.EvDone && e.Stage == 0 {
			done[e.Trial] = true
		}
	}
	if len(done) == 0 || done["b0-t0006"] {
		t.Fatalf("done before the kill: %v", done)
	}
	rented := len(markets(first))

	h.cfg.KeepNodes = false
	h.runtime.Behave = nil
	res, events, err := h.run(t, context.Background())
	if err != nil || !res.Finished {
		t.Fatalf("resume: %v\n%s", err, h.log.String())
	}
	m := markets(events)
	resumed := false
	for _, e := range events[len(first):] {
		switch {
		case e.Ev == journal.EvNodeUp && e.Node != nil:
			t.Errorf("the resumed driver rented %s node %s: every node it needs was held", e.Node.Market, e.Node.ID)
		case e.Ev == journal.EvLaunch && e.Stage == 0:
			resumed = true
			if done[e.Trial] {
				t.Errorf("trial %s was done before the kill and launched again", e.Trial)
			}
			if slices.Contains(criticalTrials, e.Trial) && m[e.Nodes[0]] != cloud.OnDemand {
				t.Errorf("critical trial %s relaunched on %s node %s: the tiers were not restored", e.Trial, m[e.Nodes[0]], e.Nodes[0])
			}
		}
	}
	if !resumed {
		t.Fatal("the resumed driver launched nothing of stage 0")
	}
	byMarket := map[cloud.Market]int{}
	for _, mk := range m {
		byMarket[mk]++
	}
	if len(m) != rented || byMarket[cloud.OnDemand] != 2 {
		t.Errorf("nodes rented: %d before the kill, %d in all (%v): the resumed driver rented anew", rented, len(m), byMarket)
	}
	wantBest, wantSurv := outcome(t, cleanEvents)
	gotBest, gotSurv := outcome(t, events)
	if gotBest != wantBest || fmt.Sprint(gotSurv) != fmt.Sprint(wantSurv) || doneTwice(events) != "" {
		t.Fatalf("resumed best %s survivors %v (done twice: %q); clean %s %v", gotBest, gotSurv, doneTwice(events), wantBest, wantSurv)
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the run", h.provider.Held())
	}
}
