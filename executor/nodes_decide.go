package executor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A run's node decisions are pure, as a stage's are (stage_decide.go): decideNodes takes what the run
// knows of its nodes (a nodeView, a copy taken under the run's lock) and what happened (a
// nodeEvent) and says what to do (nodeActions); the node loop (nodes.go) asks the provider,
// journals, and comes back with the next event. decideNodes does no I/O, reads no clock and
// takes no lock, so it is tested alone, table by table.

// nodeView is what node decisions read of the run.
type nodeView struct {
	brackets []bracketNodes
	odTier   map[string]bool // nodes a hedged stage rented on demand (serve no spot pool)
}

// bracketNodes is one bracket's nodes and what its current stage (its first not synced) wants.
type bracketNodes struct {
	held     []cloud.Node
	draining []cloud.Node // being interrupted: billing, not used
	want     int          // nodes its current stage wants; 0 once every stage synced
	own      int          // the offer its current stage rents from (an index in the model's Offers)
	stage    sim.StageAlloc
	staged   bool              // stage is its current stage's plan (false once synced, and for ASHA)
	open     map[string]string // requests no answer was journaled for: token by market asked
	// coming is the nodes this driver's requests out will bring, by market asked; flying says
	// which tokens those requests are under (not to be repeated: they are out).
	coming map[string]int
	flying map[string]bool
}

// nodeEventKind is what happened to the run's nodes, or what it asks of them.
type nodeEventKind int

const (
	neScale    nodeEventKind = iota // bring bracket to count nodes of its current stage; create: ask for the missing ones
	neAnswered                      // a scale's requests were answered (asked: the pools asked anew): ask for what is still missing
	neListed                        // a driver takes the run over: the provider holds listed
	neLost                          // bracket's nodes in lost are gone or going
	neDrained                       // bracket's nodes ids were journaled lost and no gang uses them any more
	neRetire                        // bracket no longer needs its nodes ids: no gang runs on them
	neEnd                           // the run is over (why): every node goes, listed ones no bracket knows too
)

// nodeEvent is one nodeEventKind with what it carries.
type nodeEvent struct {
	kind    nodeEventKind
	bracket int
	count   int                 // neScale, neAnswered
	create  bool                // neScale, neAnswered
	asked   map[int]bool        // neAnswered: the pools asked anew
	last    placement.Placement // neScale: the last placement (the least used nodes go first)
	listed  []cloud.Node        // neListed, neEnd
	lost    lostSet             // neLost
	ids     []string            // neDrained, neRetire
	why     string              // neEnd
}

// nodeActionKind is what the node loop is asked to do.
type nodeActionKind int

const (
	naRelease nodeActionKind = iota // ask the provider to release ids, then journal records (billing stops when asked)
	naAsk                           // rent nodes: journal a new request, send it, journal the fresh nodes, then the answer
	naRecord                        // journal records
	naLog                           // say text
)

// nodeAction is one thing to do with nodes.
type nodeAction struct {
	kind    nodeActionKind
	bracket int
	ids     []string        // naRelease
	records []journal.Event // naRelease, naRecord; a release's stamped with the moment it was asked
	orphans []cloud.Node    // naRelease: nodes no bracket knew, journaled as billed until the release
	// bestEffort: a failed release is said, not fatal (the run's end and a resumed driver
	// release them again).
	bestEffort bool
	ask        nodeAsk // naAsk
	text       string  // naLog; for naRelease, said once the release succeeded
}

// nodeAsk is one request for nodes of a scale-up: count nodes for pool (an index in the scale's
// pools) in market (as journaled: "" for the stage's own), under token (a new request's is made
// when it is journaled); repeat when it repeats a request a dead driver left open.
type nodeAsk struct {
	pool, count int
	market      string
	token       string
	repeat      bool
}

// decideNodes is what to do about e, given v.
func decideNodes(o offers, v nodeView, e nodeEvent) []nodeAction {
	switch e.kind {
	case neScale:
		return o.scale(v, e)
	case neAnswered:
		pools := o.poolsFor(v.brackets[e.bracket], e.count)
		mine, _ := o.sortPools(v.brackets[e.bracket].held, pools, v.odTier)
		return o.asks(e.bracket, v.brackets[e.bracket], pools, mine, e.asked)
	case neListed:
		return o.reconcile(v, e.listed)
	case neLost:
		var nodes []cloud.Node
		for _, n := range v.brackets[e.bracket].held {
			if _, ok := e.lost[n.ID]; ok {
				nodes = append(nodes, n)
			}
		}
		return lossOf(e.bracket, nodes, e.lost)
	case neDrained:
		var held []string
		for _, n := range v.brackets[e.bracket].draining {
			if slices.Contains(e.ids, n.ID) {
				held = append(held, n.ID)
			}
		}
		a := nodeAction{kind: naRelease, bracket: e.bracket, ids: e.ids, bestEffort: true}
		if len(held) > 0 {
			a.records = []journal.Event{{Ev: journal.EvNodeOff, Bracket: e.bracket, Nodes: held, Error: "released after its interruption", Cause: string(journal.NodeDrained)}}
		}
		return []nodeAction{a}
	case neRetire:
		return []nodeAction{releasing(e.bracket, e.ids, "", journal.NodeReleased)}
	case neEnd:
		return endAll(v, e.listed, e.why)
	}
	panic(fmt.Sprintf("decideNodes: event kind %d", e.kind))
}

// releasing is the release of bracket b's nodes ids, journaled with why and cause.
func releasing(b int, ids []string, why string, cause journal.NodeCause) nodeAction {
	return nodeAction{kind: naRelease, bracket: b, ids: ids, records: []journal.Event{{Ev: journal.EvNodeOff, Bracket: b, Nodes: ids, Error: why, Cause: string(cause)}}}
}

// scale brings bracket e.bracket to e.count nodes of its current stage's instance type and market
// (a hedged stage's: its on-demand nodes and the rest spot, poolsFor): nodes that cannot serve it
// (serves) go first, all of them (a stage on another offer starts its own, as the simulator has
// it); then, in each market, the least used nodes under the last placement are released
// (bin-packing before scale-down); new ones are asked for (create), one request per market.
func (o offers) scale(v nodeView, e nodeEvent) []nodeAction {
	bn := v.brackets[e.bracket]
	pools := o.poolsFor(bn, e.count)
	mine, other := o.sortPools(bn.held, pools, v.odTier)
	if e.count == 0 {
		mine, other = make([][]cloud.Node, len(pools)), nodeIDs(bn.held)
	}
	var out []nodeAction
	last := maps.Clone(e.last) // the releases forget the placements on their nodes, as the loop does
	if len(other) > 0 {
		out = append(out, releasing(e.bracket, other, "", journal.NodeReleased))
		forgetPlacementsOn(last, other)
	}
	for i, p := range pools {
		if len(mine[i]) > p.count {
			drop := placement.Release(toPlacementNodes(mine[i]), p.count, last)
			out = append(out, releasing(e.bracket, drop, "", journal.NodeReleased))
			forgetPlacementsOn(last, drop)
			mine[i] = slices.DeleteFunc(mine[i], func(node cloud.Node) bool { return slices.Contains(drop, node.ID) })
		}
	}
	if !e.create {
		return out
	}
	return append(out, o.asks(e.bracket, bn, pools, mine, nil)...)
}

// asks is the requests that bring each pool to its count, given the nodes mine counts in it and
// those this driver's requests out will bring (coming: a replacement asked for while another is
// out asks only for what is missing beside it). A request a dead driver left open is repeated
// first, in the market it asked: it hands back what it rented then, less what the journal knows
// already; whatever is still missing is asked for anew, once per scale (asked). A hedged stage's
// markets are asked at once, as the simulator starts a stage's new nodes together.
func (o offers) asks(b int, bn bracketNodes, pools []nodePool, mine [][]cloud.Node, asked map[int]bool) []nodeAction {
	var out []nodeAction
	for i, p := range pools {
		market := o.requestMarket(p.offer, bn.own)
		token, repeat := bn.open[market]
		if bn.flying[token] {
			token, repeat = "", false // out now, its nodes coming
		}
		have := len(mine[i]) + bn.coming[market]
		if have >= p.count || (asked[i] && !repeat) {
			continue
		}
		out = append(out, nodeAction{kind: naAsk, bracket: b, ask: nodeAsk{pool: i, count: p.count - have, market: market, token: token, repeat: repeat}})
	}
	return out
}

// reconcile makes the nodes the journal says are held agree with what the provider holds
// (listed): nodes an earlier driver was draining go now; nodes the provider lost are journaled
// gone. Nodes it holds that no bracket knows (a driver died between renting and journaling them)
// are adopted by a bracket whose current stage still wants nodes; still-pending ones are left to
// the request that rented them, which the bracket repeats under its token; the rest are
// released. Each is said.
func (o offers) reconcile(v nodeView, listed []cloud.Node) []nodeAction {
	have := map[string]bool{}
	for _, n := range listed {
		have[n.ID] = true
	}
	known := map[string]bool{}
	var out, losses []nodeAction
	for b, bn := range v.brackets {
		var lost []cloud.Node
		for _, n := range bn.held {
			if have[n.ID] {
				known[n.ID] = true
			} else {
				lost = append(lost, n)
			}
		}
		// Nodes an earlier driver was draining (interrupted) are of no use: they go now, or are
		// journaled gone if the provider took them meanwhile.
		if len(bn.draining) > 0 {
			out = append(out, releasing(b, nodeIDs(bn.draining), "released after its interruption", journal.NodeDrained))
			for _, n := range bn.draining {
				known[n.ID] = true
			}
		}
		if len(lost) > 0 {
			why := lostSet{}
			for _, n := range lost {
				why[n.ID] = lostNode{why: "gone while no driver ran"}
			}
			losses = append(losses, nodeAction{kind: naLog, text: fmt.Sprintf("resume: the provider no longer holds %d node(s) of bracket %d\n", len(lost), b)})
			losses = append(losses, lossOf(b, lost, why)...)
		}
	}
	out = append(out, losses...)
	holds := make([]int, len(v.brackets)) // what each bracket holds once its lost nodes went, adopted ones counted
	for b, bn := range v.brackets {
		for _, n := range bn.held {
			if have[n.ID] {
				holds[b]++
			}
		}
	}
	var orphans []cloud.Node
	closed := map[int]bool{}
	for _, n := range listed {
		if known[n.ID] {
			continue
		}
		switch b, fate := fateOf(v, holds, n); fate {
		case closeRequest:
			out = append(out, nodeAction{kind: naLog, text: fmt.Sprintf("resume: node %s was rented by bracket %d's request, which will not be repeated (the bracket holds the nodes it wants): it is released\n", n.ID, b)})
			orphans = append(orphans, n)
			closed[b] = true
		case adopt:
			out = append(out, nodeAction{kind: naLog, text: fmt.Sprintf("resume: bracket %d adopts node %s, rented by a driver that died before journaling it\n", b, n.ID)},
				nodeAction{kind: naRecord, bracket: b, records: []journal.Event{{Ev: journal.EvNodeUp, At: n.RunningAt, Bracket: b, Node: &n, Error: "adopted: rented by a driver that died before journaling it"}}})
			holds[b]++
			known[n.ID] = true
		case leave:
			out = append(out, nodeAction{kind: naLog, text: fmt.Sprintf("resume: node %s is left to bracket %d's request that rented it, which is repeated\n", n.ID, b)})
			known[n.ID] = true
		default:
			orphans = append(orphans, n)
		}
	}
	if len(orphans) > 0 {
		out = append(out, nodeAction{kind: naLog, text: fmt.Sprintf("resume: releasing nodes no bracket knows: %v\n", nodeIDs(orphans))},
			nodeAction{kind: naRelease, ids: nodeIDs(orphans), orphans: orphans})
	}
	// A request whose nodes went is answered: a later scale-up asks anew rather than repeat it.
	for b := range v.brackets {
		if !closed[b] {
			continue
		}
		var answers []journal.Event
		for _, m := range slices.Sorted(maps.Keys(v.brackets[b].open)) {
			answers = append(answers, journal.Event{Ev: journal.EvAnswer, Bracket: b, Token: v.brackets[b].open[m]})
		}
		out = append(out, nodeAction{kind: naRecord, bracket: b, records: answers})
	}
	return out
}

// What reconcile does with a node the provider holds and the journal does not know.
type orphanFate int

const (
	release      orphanFate = iota // released, journaled as billed until then
	adopt                          // into the bracket fateOf names
	leave                          // to the bracket whose request rented it: repeated, it hands the node back
	closeRequest                   // released, and the request that rented it answered: it is not repeated
)

// fateOf decides an orphan's fate, given what each bracket holds (holds). A node that names the
// request it was rented under (Token) is left to the bracket whose request that is, if no answer
// to it was journaled and the bracket still wants more nodes than it holds (the repeated request
// hands it back); a bracket that holds what it wants does not repeat it, so the node goes and the
// request is closed (left, it would bill unjournaled); a node of no open request is released.
// For a provider that keeps no tokens, a running node goes to the first bracket whose current
// stage wants more nodes than it holds, and a pending one is left while a bracket has a request
// without an answer; anything else is released.
func fateOf(v nodeView, holds []int, n cloud.Node) (int, orphanFate) {
	if n.Token != "" {
		for b, bn := range v.brackets {
			for _, token := range bn.open {
				if token != n.Token {
					continue
				}
				if holds[b] < bn.want {
					return b, leave
				}
				return b, closeRequest
			}
		}
		return 0, release
	}
	for b, bn := range v.brackets {
		if holds[b] >= bn.want {
			continue
		}
		if n.RunningAt.IsZero() && len(bn.open) > 0 {
			return b, leave
		}
		if !n.RunningAt.IsZero() {
			return b, adopt
		}
	}
	return 0, release
}

// endAll releases every node the run holds, and every node the provider holds for it (listed)
// that the journal does not know, then journals the release, per bracket, and what the unknown
// ones billed.
func endAll(v nodeView, listed []cloud.Node, why string) []nodeAction {
	known := map[string]bool{}
	var ids []string
	var records []journal.Event
	for b, bn := range v.brackets {
		var held []string
		for _, n := range append(slices.Clone(bn.held), bn.draining...) {
			held = append(held, n.ID)
			known[n.ID] = true
		}
		if len(held) > 0 {
			ids = append(ids, held...)
			records = append(records, journal.Event{Ev: journal.EvNodeOff, Bracket: b, Nodes: held, Error: why, Cause: string(journal.NodeReleased)})
		}
	}
	var unknown []cloud.Node
	for _, n := range listed {
		if !known[n.ID] {
			ids = append(ids, n.ID)
			unknown = append(unknown, n)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return []nodeAction{{kind: naRelease, ids: ids, records: records, orphans: unknown, text: fmt.Sprintf("released %d node(s): %v\n", len(ids), ids)}}
}

// lostOf is which of held are gone or going, with why: the ones the provider no longer holds
// (not in listed), and doomed (whose worker was told it is being interrupted), when held.
func lostOf(held, listed []cloud.Node, doomed *gang.InterruptedError) lostSet {
	alive := map[string]bool{}
	for _, n := range listed {
		alive[n.ID] = true
	}
	lost := lostSet{}
	for _, n := range held {
		switch {
		case doomed != nil && n.ID == doomed.Node:
			lost[n.ID] = lostNode{why: doomed.Reason, held: alive[n.ID]}
		case !alive[n.ID]:
			lost[n.ID] = lostNode{why: "the provider no longer holds it"}
		}
	}
	return lost
}

// lossOf journals nodes of bracket b gone or going for the reasons given by ID: nodes still held
// (being interrupted) as an interruption that bills until they are released, spot nodes gone as
// an interruption, the others as lost.
func lossOf(b int, nodes []cloud.Node, lost lostSet) []nodeAction {
	var draining, spot, other []string
	var reasons, drainReasons []string
	for _, n := range nodes {
		l := lost[n.ID]
		switch {
		case l.held:
			draining = append(draining, n.ID)
			if !slices.Contains(drainReasons, l.why) {
				drainReasons = append(drainReasons, l.why)
			}
		case n.Market == cloud.Spot:
			spot = append(spot, n.ID)
			if !slices.Contains(reasons, l.why) {
				reasons = append(reasons, l.why)
			}
		default:
			other = append(other, n.ID)
		}
	}
	var out []nodeAction
	say := func(text string, e journal.Event) {
		out = append(out, nodeAction{kind: naLog, text: text}, nodeAction{kind: naRecord, bracket: b, records: []journal.Event{e}})
	}
	if len(draining) > 0 {
		say(fmt.Sprintf("node(s) being interrupted: %v (%s); replacing them, and releasing them once their gangs saved\n", draining, strings.Join(drainReasons, "; ")),
			journal.Event{Ev: journal.EvInterrupt, Bracket: b, Nodes: draining, Error: strings.Join(drainReasons, "; "), Draining: true})
	}
	if len(spot) > 0 {
		say(fmt.Sprintf("spot node(s) interrupted: %v (%s); replacing them\n", spot, strings.Join(reasons, "; ")),
			journal.Event{Ev: journal.EvInterrupt, Bracket: b, Nodes: spot, Error: strings.Join(reasons, "; ")})
	}
	if len(other) > 0 {
		say(fmt.Sprintf("nodes lost: %v; replacing them\n", other),
			journal.Event{Ev: journal.EvNodeOff, Bracket: b, Nodes: other, Error: "lost", Cause: string(journal.NodeLost)})
	}
	return out
}

// forgetPlacementsOn forgets the placements of last with a slot on one of nodes.
func forgetPlacementsOn(last placement.Placement, nodes []string) {
	for t, slots := range last {
		for _, s := range slots {
			if slices.Contains(nodes, s.Node) {
				delete(last, t)
			}
		}
	}
}

// offers is what node decisions read of the model: which offer a node or a stage rents from,
// and whether a spot type's on-demand fallback serves it (cluster.spot.fallback).
type offers struct {
	model    *sim.Model
	fallback bool
}

// nodePool is nodes of one offer (an index in the model's Offers) a stage wants held: count of
// them.
type nodePool struct{ offer, count int }

// poolsFor is what a bracket's current stage wants held, n nodes in all, by offer: all of its
// own offer; but a hedged stage (sim.StageAlloc.OnDemand, Proteus' reliability tiers) holds its
// on-demand nodes, of the same type on the on-demand market, first (up to n), and the rest on
// spot, as the simulator keeps its nodes per market.
func (o offers) poolsFor(bn bracketNodes, n int) []nodePool {
	if !bn.staged || bn.stage.OnDemand <= 0 || n == 0 {
		return []nodePool{{bn.own, n}}
	}
	od, ok := o.model.OnDemandOf(bn.own)
	if !ok { // Check refuses such a plan; hold it in one market rather than fail here
		return []nodePool{{bn.own, n}}
	}
	k := min(bn.stage.OnDemand, n)
	return []nodePool{{od, k}, {bn.own, n - k}}
}

// serves reports whether a node can serve a stage of offer want: it was rented from that offer
// (a node that names no offer the model knows is taken for the default one: a provider of one
// kind of node), or it is the on-demand node a provider fell back to for that type's spot
// market (cluster.spot.fallback), which a replacement must not churn.
func (o offers) serves(n cloud.Node, want int) bool {
	of, _ := o.model.OfferIndex(sim.StageAlloc{Type: n.InstanceType, Market: string(n.Market)})
	if of == want {
		return true
	}
	w := o.model.Offers[want]
	return w.Market == spec.MarketSpot && n.Market == cloud.OnDemand && o.model.Offers[of].Type == w.Type && o.fallback
}

// poolIn is sortPools' pass: 0, a pool of the node's own offer with room; 1, one it serves with
// room (a hedged stage's on-demand node, in odTier, serves none but its own); 2, one of its own
// offer, room or not (its surplus: the least used go).
func (o offers) poolIn(n cloud.Node, pools []nodePool, mine [][]cloud.Node, pass int, odTier map[string]bool) int {
	of, known := o.model.OfferIndex(sim.StageAlloc{Type: n.InstanceType, Market: string(n.Market)})
	for i, p := range pools {
		room := len(mine[i]) < p.count
		switch {
		case pass == 0 && known && p.offer == of && room,
			pass == 1 && !odTier[n.ID] && o.serves(n, p.offer) && room,
			pass == 2 && known && p.offer == of:
			return i
		}
	}
	return -1
}

// sortPools counts held nodes in pools (poolOf), each pass over every node before the next:
// a node of a pool's own offer takes its room before one that only serves it (an on-demand node a
// hedged stage held, kept by the spot stage after it, would bill at the on-demand price where
// the simulator keeps spot nodes and releases it). The nodes no pool takes are other.
func (o offers) sortPools(held []cloud.Node, pools []nodePool, odTier map[string]bool) (mine [][]cloud.Node, other []string) {
	mine = make([][]cloud.Node, len(pools))
	taken := make([]bool, len(held))
	for pass := range 3 {
		for j, n := range held {
			if taken[j] {
				continue
			}
			if i := o.poolIn(n, pools, mine, pass, odTier); i >= 0 {
				mine[i] = append(mine[i], n)
				taken[j] = true
			}
		}
	}
	for j, n := range held {
		if !taken[j] {
			other = append(other, n.ID)
		}
	}
	return mine, other
}

// requestMarket is how a request for offer p is journaled (Event.Market) while the stage's own
// offer is own: "" for own, else p's market (a hedged stage's on-demand nodes).
func (o offers) requestMarket(p, own int) string {
	if p == own {
		return ""
	}
	return o.model.Offers[p].Market
}

func nodeIDs(nodes []cloud.Node) []string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return ids
}

func toPlacementNodes(nodes []cloud.Node) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = placement.Node{ID: n.ID, GPUs: n.GPUs}
	}
	return out
}
