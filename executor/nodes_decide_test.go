package executor

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// decideNodes alone, table by table: no provider, no journal, no goroutine, no clock. Each case
// gives what the run knows and what happened, and the actions it must take, written out as
// lines (describe) so a wrong release, request or journal record shows as a diff.
func TestDecideNodes(t *testing.T) {
	exp, err := spec.Parse("t.yaml", []byte(`name: nodes
objective: {metric: acc}
algorithm: {stages: [{trials: 4, iters: 1}, {trials: 2, iters: 2}]}
cluster: {instance_type: p3.8xlarge, markets: [on-demand, spot], spot: {discount: 0.7, interruptions_per_hour: 5, fallback: on-demand}}
profile: {iter_latency: {1: {mean: 1}}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewModel(exp)
	if err != nil {
		t.Fatal(err)
	}
	o := offers{model: m, fallback: true}
	spot, ok := m.OfferIndex(sim.StageAlloc{Market: spec.MarketSpot})
	if !ok {
		t.Fatal("no spot offer")
	}
	od, ok := m.OnDemandOf(spot)
	if !ok || od == spot {
		t.Fatalf("no on-demand offer beside spot %d", spot)
	}
	typ := m.Offers[spot].Type
	running := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	node := func(id string, market cloud.Market) cloud.Node {
		return cloud.Node{ID: id, InstanceType: typ, Market: market, GPUs: 4, RunningAt: running}
	}
	s1, s2, s3, d1 := node("s1", cloud.Spot), node("s2", cloud.Spot), node("s3", cloud.Spot), node("d1", cloud.OnDemand)
	onSpot := func(held ...cloud.Node) bracketNodes {
		return bracketNodes{held: held, want: 3, own: spot, stage: sim.StageAlloc{Market: spec.MarketSpot, Nodes: 3}, staged: true}
	}
	hedged := func(held ...cloud.Node) bracketNodes {
		bn := onSpot(held...)
		bn.stage.OnDemand = 1
		return bn
	}
	pending := s3
	pending.RunningAt = time.Time{}
	tokened := node("t1", cloud.Spot)
	tokened.Token = "b0-r4"

	cases := []struct {
		name string
		view nodeView
		e    nodeEvent
		want []string
	}{
		{
			name: "scale up from nothing: one new request",
			view: nodeView{brackets: []bracketNodes{onSpot()}},
			e:    nodeEvent{kind: neScale, count: 3, create: true},
			want: []string{"ask b0 pool 0: 3 in the stage's market, new"},
		},
		{
			name: "shrink: no request, the least used go first",
			view: nodeView{brackets: []bracketNodes{onSpot(s1, s2, s3)}},
			e: nodeEvent{kind: neScale, count: 1, last: placement.Placement{
				"a": {{Node: "s2", GPUs: []int{0, 1, 2, 3}}}, "b": {{Node: "s3", GPUs: []int{0}}},
			}},
			want: []string{"release b0 [s1 s3]: node-off b0 [s1 s3] released"},
		},
		{
			name: "to zero: all go",
			view: nodeView{brackets: []bracketNodes{onSpot(s1, d1)}},
			e:    nodeEvent{kind: neScale, count: 0, create: true},
			want: []string{"release b0 [s1 d1]: node-off b0 [s1 d1] released"},
		},
		{
			name: "an on-demand node the spot market fell back to serves the spot stage",
			view: nodeView{brackets: []bracketNodes{onSpot(d1, s1)}},
			e:    nodeEvent{kind: neScale, count: 3, create: true},
			want: []string{"ask b0 pool 0: 1 in the stage's market, new"},
		},
		{
			name: "a hedged stage: its on-demand node first, spot for the rest, both asked at once",
			view: nodeView{brackets: []bracketNodes{hedged()}},
			e:    nodeEvent{kind: neScale, count: 3, create: true},
			want: []string{"ask b0 pool 0: 1 in on-demand, new", "ask b0 pool 1: 2 in the stage's market, new"},
		},
		{
			name: "a hedged stage's on-demand node serves no spot pool",
			view: nodeView{brackets: []bracketNodes{onSpot(d1, s1)}, odTier: map[string]bool{"d1": true}},
			e:    nodeEvent{kind: neScale, count: 2, create: true},
			want: []string{"release b0 [d1]: node-off b0 [d1] released", "ask b0 pool 0: 1 in the stage's market, new"},
		},
		{
			name: "a request a dead driver left open is repeated under its token",
			view: nodeView{brackets: []bracketNodes{func() bracketNodes {
				bn := onSpot(s1)
				bn.open = map[string]string{"": "b0-r2"}
				return bn
			}()}},
			e:    nodeEvent{kind: neScale, count: 3, create: true},
			want: []string{"ask b0 pool 0: 2 in the stage's market, repeat b0-r2"},
		},
		{
			name: "a request of this driver's out: its nodes are coming, only the rest is asked for, anew",
			view: nodeView{brackets: []bracketNodes{func() bracketNodes {
				bn := onSpot(s1)
				bn.open, bn.coming, bn.flying = map[string]string{"": "b0-r2"}, map[string]int{"": 1}, map[string]bool{"b0-r2": true}
				return bn
			}()}},
			e:    nodeEvent{kind: neScale, count: 3, create: true},
			want: []string{"ask b0 pool 0: 1 in the stage's market, new"},
		},
		{
			name: "requests out bring every node missing: nothing is asked",
			view: nodeView{brackets: []bracketNodes{func() bracketNodes {
				bn := onSpot(s1)
				bn.open, bn.coming, bn.flying = map[string]string{"": "b0-r3"}, map[string]int{"": 2}, map[string]bool{"b0-r2": true, "b0-r3": true}
				return bn
			}()}},
			e: nodeEvent{kind: neScale, count: 3, create: true},
		},
		{
			name: "answered: a pool asked anew once is not asked again",
			view: nodeView{brackets: []bracketNodes{onSpot(s1)}},
			e:    nodeEvent{kind: neAnswered, count: 3, create: true, asked: map[int]bool{0: true}},
		},
		{
			name: "answered: a repeated request came short, the rest is asked anew",
			view: nodeView{brackets: []bracketNodes{onSpot(s1)}},
			e:    nodeEvent{kind: neAnswered, count: 3, create: true, asked: map[int]bool{}},
			want: []string{"ask b0 pool 0: 2 in the stage's market, new"},
		},
		{
			name: "lost: held and being interrupted drains, spot gone is interrupted, on-demand gone is lost",
			view: nodeView{brackets: []bracketNodes{onSpot(s1, s2, d1, s3)}},
			e: nodeEvent{kind: neLost, lost: lostSet{
				"s1": {why: "notice", held: true}, "s2": {why: "reclaimed"}, "d1": {why: "gone"},
			}},
			want: []string{
				"say node(s) being interrupted: [s1] (notice); replacing them, and releasing them once their gangs saved",
				"record interrupt b0 [s1] notice draining",
				"say spot node(s) interrupted: [s2] (reclaimed); replacing them",
				"record interrupt b0 [s2] reclaimed",
				"say nodes lost: [d1]; replacing them",
				"record node-off b0 [d1] lost lost",
			},
		},
		{
			name: "drained: only those still held are journaled released",
			view: nodeView{brackets: []bracketNodes{{draining: []cloud.Node{s1}}}},
			e:    nodeEvent{kind: neDrained, ids: []string{"s1", "s2"}},
			want: []string{"release b0 [s1 s2] (best effort): node-off b0 [s1] released after its interruption drained"},
		},
		{
			name: "end: every bracket's nodes and the ones no bracket knows",
			view: nodeView{brackets: []bracketNodes{onSpot(s1), {draining: []cloud.Node{s2}}}},
			e:    nodeEvent{kind: neEnd, listed: []cloud.Node{s1, s2, d1}, why: "done"},
			want: []string{"release b0 [s1 s2 d1]: node-off b0 [s1] done released, node-off b1 [s2] done released, orphans [d1]"},
		},
		{
			name: "takeover: draining goes, lost is journaled, an unknown running node is adopted by a bracket short of nodes",
			view: nodeView{brackets: []bracketNodes{
				func() bracketNodes { bn := onSpot(s1, s2); bn.draining = []cloud.Node{d1}; return bn }(),
			}},
			e: nodeEvent{kind: neListed, listed: []cloud.Node{s1, d1, s3}},
			want: []string{
				"release b0 [d1]: node-off b0 [d1] released after its interruption drained",
				"say resume: the provider no longer holds 1 node(s) of bracket 0",
				"say spot node(s) interrupted: [s2] (gone while no driver ran); replacing them",
				"record interrupt b0 [s2] gone while no driver ran",
				"say resume: bracket 0 adopts node s3, rented by a driver that died before journaling it",
				"record node-up b0 s3 adopted: rented by a driver that died before journaling it",
			},
		},
		{
			name: "takeover: a bracket that holds what it wants adopts nothing; the node goes as an orphan",
			view: nodeView{brackets: []bracketNodes{onSpot(s1, s2, d1)}},
			e:    nodeEvent{kind: neListed, listed: []cloud.Node{s1, s2, d1, s3}},
			want: []string{
				"say resume: releasing nodes no bracket knows: [s3]",
				"release b0 [s3]: orphans [s3]",
			},
		},
		{
			name: "takeover: a pending node is left to the open request that will be repeated",
			view: nodeView{brackets: []bracketNodes{func() bracketNodes {
				bn := onSpot(s1)
				bn.open = map[string]string{"": "b0-r1"}
				return bn
			}()}},
			e:    nodeEvent{kind: neListed, listed: []cloud.Node{s1, pending}},
			want: []string{"say resume: node s3 is left to bracket 0's request that rented it, which is repeated"},
		},
		{
			name: "takeover: a tokened node of a bracket holding what it wants is released and its request answered",
			view: nodeView{brackets: []bracketNodes{func() bracketNodes {
				bn := onSpot(s1, s2, s3)
				bn.open = map[string]string{"": "b0-r4"}
				return bn
			}()}},
			e: nodeEvent{kind: neListed, listed: []cloud.Node{s1, s2, s3, tokened}},
			want: []string{
				"say resume: node t1 was rented by bracket 0's request, which will not be repeated (the bracket holds the nodes it wants): it is released",
				"say resume: releasing nodes no bracket knows: [t1]",
				"release b0 [t1]: orphans [t1]",
				"record answer b0 b0-r4",
			},
		},
		{
			name: "takeover: two orphans, one bracket short by one: the first is adopted, the second goes",
			view: nodeView{brackets: []bracketNodes{onSpot(s1, s2)}},
			e:    nodeEvent{kind: neListed, listed: []cloud.Node{s1, s2, s3, d1}},
			want: []string{
				"say resume: bracket 0 adopts node s3, rented by a driver that died before journaling it",
				"record node-up b0 s3 adopted: rented by a driver that died before journaling it",
				"say resume: releasing nodes no bracket knows: [d1]",
				"release b0 [d1]: orphans [d1]",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := describe(decideNodes(o, c.view, c.e))
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// lostOf: the doomed node is lost while the provider still holds it (it drains); a node the
// provider no longer lists is lost; the rest are not.
func TestLostOf(t *testing.T) {
	a, b, c := cloud.Node{ID: "a"}, cloud.Node{ID: "b"}, cloud.Node{ID: "c"}
	got := lostOf([]cloud.Node{a, b, c}, []cloud.Node{a, b}, &gang.InterruptedError{Node: "a", Reason: "notice"})
	want := lostSet{"a": {why: "notice", held: true}, "c": {why: "the provider no longer holds it"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lostOf = %v, want %v", got, want)
	}
}

// describe writes actions as lines a test compares.
func describe(acts []nodeAction) []string {
	var out []string
	for _, a := range acts {
		switch a.kind {
		case naLog:
			out = append(out, "say "+strings.TrimSuffix(a.text, "\n"))
		case naRecord:
			out = append(out, "record "+describeEvents(a.records))
		case naRelease:
			line := fmt.Sprintf("release b%d %v", a.bracket, a.ids)
			if a.bestEffort {
				line += " (best effort)"
			}
			var parts []string
			if len(a.records) > 0 {
				parts = append(parts, describeEvents(a.records))
			}
			if len(a.orphans) > 0 {
				parts = append(parts, fmt.Sprintf("orphans %v", nodeIDs(a.orphans)))
			}
			out = append(out, line+": "+strings.Join(parts, ", "))
		case naAsk:
			market, how := "the stage's market", "new"
			if a.ask.market != "" {
				market = a.ask.market
			}
			if a.ask.repeat {
				how = "repeat " + a.ask.token
			}
			out = append(out, fmt.Sprintf("ask b%d pool %d: %d in %s, %s", a.bracket, a.ask.pool, a.ask.count, market, how))
		}
	}
	return out
}

func describeEvents(es []journal.Event) string {
	var out []string
	for _, e := range es {
		var s string
		switch e.Ev {
		case journal.EvNodeOff:
			s = fmt.Sprintf("node-off b%d %v %s %s", e.Bracket, e.Nodes, e.Error, e.Cause)
		case journal.EvInterrupt:
			s = fmt.Sprintf("interrupt b%d %v %s", e.Bracket, e.Nodes, e.Error)
			if e.Draining {
				s += " draining"
			}
		case journal.EvNodeUp:
			s = fmt.Sprintf("node-up b%d %s %s", e.Bracket, e.Node.ID, e.Error)
		case journal.EvAnswer:
			s = fmt.Sprintf("answer b%d %s", e.Bracket, e.Token)
		default:
			s = fmt.Sprintf("%v", e)
		}
		out = append(out, strings.Join(strings.Fields(s), " "))
	}
	return strings.Join(out, ", ")
}
