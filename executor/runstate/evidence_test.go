package runstate

import (
	"io"
	"math"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The first wave of the first stage, launched before any launch of it ended, is evidence of the
// first-stage lag, not of the start-up: two trials launched at once take 5 s to their first
// report (4 s of start-up beyond one 1 s iteration, against the profile's 1 s), the two launched
// after them 2 s (1 s, the profile's). The start-up stays 1 s, the iterations 1 s; the lag moves
// from 0 by the first wave's 3 s beyond the start-up, two launches against the profile's two:
// 2*3/(2+2) = 1.5 s.
func TestFirstWaveEvidenceIsTheLags(t *testing.T) {
	src := "name: t\nobjective: {metric: acc}\nalgorithm: {stages: [{trials: 4, iters: 1}, {trials: 2, iters: 2}]}\n" +
		"cluster: {gpus_per_node: 2, price_per_hour: 1}\nprofile: {iter_latency: {1: {value: 1}}, startup_latency: {value: 1s}}\n"
	exp, m := modelOf(t, src)
	brackets := exp.Algorithm.Brackets()
	st := newState(exp, brackets, m.Elastic([][]int{{2, 2}}), m, 1, io.Discard)
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	events := []journal.Event{{Ev: journal.EvStart, At: t0}}
	for _, id := range []string{"a", "b", "c", "d"} {
		events = append(events, journal.Event{Ev: journal.EvTrial, At: t0, Trial: id})
	}
	launch := func(id string, s float64) journal.Event {
		return journal.Event{Ev: journal.EvLaunch, At: at(s), Trial: id, Try: 1, GPUs: 1}
	}
	report := func(id string, s float64) journal.Event {
		return journal.Event{Ev: journal.EvReport, At: at(s), Trial: id, Iter: 1}
	}
	done := func(id string, s float64) journal.Event {
		return journal.Event{Ev: journal.EvDone, At: at(s), Trial: id, Iter: 1, GPUs: 1}
	}
	events = append(events, journal.Event{Ev: journal.EvStage, At: t0, GPUs: 2}, launch("a", 0), launch("b", 0), report("a", 5), report("b", 5), done("a", 5),
		launch("c", 5), done("b", 5), launch("d", 5), report("c", 7), report("d", 7), done("c", 7), done("d", 7))
	for _, e := range events {
		st.Apply(e)
	}
	ev := st.SimEvidence(func(EvidenceKey) float64 { return 1 }, at(7))
	if got := ev.FirstWave[0]; got != (sim.Observed{Sum: 8, N: 2}) {
		t.Fatalf("first wave %+v, want 2 start-ups of 4 s", got)
	}
	if got := ev.Startup[0]; got != (sim.Observed{Sum: 2, N: 2}) {
		t.Fatalf("start-ups %+v, want 2 of 1 s", got)
	}
	p := m.Posterior(ev)
	if p.Startup.Mean() != 1 || p.IterLatency(1).Mean() != 1 || math.Abs(p.FirstLag.Mean()-1.5) > 1e-12 {
		t.Fatalf("start-up %v, iteration %v, lag %v; want 1, 1, 1.5", p.Startup.Mean(), p.IterLatency(1).Mean(), p.FirstLag.Mean())
	}
}

// The spot market's evidence is the spot nodes taken over the node-seconds held there, in spec
// time, from the journal. At time scale 0.5 (wall seconds per spec second), all up from 0: a
// spot node given its notice at 50 s of wall time (draining until released at 65 s, counted to
// the notice), one released at 25 s, one still held now at 100 s, and an on-demand node (not
// the spot market's); and a spot node released at 10 s whose ID a provider rents again at 20 s,
// taken at 30 s (its first span holds no interruption): two interruptions in
// (50 + 25 + 100 + 10 + 10) / 0.5 = 390 node-seconds.
func TestInterruptionEvidenceFromTheJournal(t *testing.T) {
	src := "name: t\nobjective: {metric: acc}\nalgorithm: {stages: [{trials: 4, iters: 1}]}\n" +
		"cluster: {gpus_per_node: 1, price_per_hour: 1, markets: [on-demand, spot], spot: {discount: 0.5, interruptions_per_hour: 1}}\n" +
		"profile: {iter_latency: {1: {value: 1}}}\n"
	exp, m := modelOf(t, src)
	st := newState(exp, exp.Algorithm.Brackets(), m.Elastic([][]int{{4}}), m, 0.5, io.Discard)
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	up := func(id string, market cloud.Market) journal.Event {
		return journal.Event{Ev: journal.EvNodeUp, At: t0, Node: &cloud.Node{ID: id, GPUs: 1, RunningAt: t0, Market: market}}
	}
	for _, e := range []journal.Event{{Ev: journal.EvStart, At: t0}, up("taken", cloud.Spot), up("released", cloud.Spot), up("held", cloud.Spot), up("od", cloud.OnDemand),
		{Ev: journal.EvInterrupt, At: at(50), Nodes: []string{"taken"}, Draining: true, Error: "notice"},
		{Ev: journal.EvNodeOff, At: at(25), Nodes: []string{"released"}, Cause: string(journal.NodeReleased)},
		{Ev: journal.EvNodeOff, At: at(65), Nodes: []string{"taken"}, Cause: string(journal.NodeDrained)},
		up("again", cloud.Spot), {Ev: journal.EvNodeOff, At: at(10), Nodes: []string{"again"}, Cause: string(journal.NodeReleased)},
		{Ev: journal.EvNodeUp, At: at(20), Node: &cloud.Node{ID: "again", GPUs: 1, RunningAt: at(20), Market: cloud.Spot}},
		{Ev: journal.EvInterrupt, At: at(30), Nodes: []string{"again"}, Error: "taken"},
	} {
		st.Apply(e)
	}
	spot, _ := m.OfferIndex(sim.StageAlloc{Market: spec.MarketSpot})
	got := st.interruptionEvidence(at(100))
	if len(got) != 1 || got[spot] != (sim.Observed{Sum: 2, N: 390}) {
		t.Fatalf("evidence %+v, want two interruptions in 390 node-seconds on offer %d", got, spot)
	}
}

// modelOf parses the spec src and builds its model.
func modelOf(t *testing.T, src string) (*spec.Experiment, *sim.Model) {
	t.Helper()
	exp, err := spec.Parse("t.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	return exp, m
}
