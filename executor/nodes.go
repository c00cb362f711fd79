package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// How the executor learns of a node going away: it polls Provider.List when a gang fails (heal)
// and when a driver takes over a run (reconcile). A lost node fails its gangs first, so nothing
// is missed between polls.

// reconcile makes the nodes the journal says are held agree with what the provider holds:
// nodes the provider lost are forgotten. Nodes it holds that no bracket knows (a driver died
// between renting and journaling them) are adopted by a bracket whose current stage still wants
// nodes; still-pending ones are left to the request that rented them, which the bracket repeats
// under its token; the rest are released. Each is said.
func (x *run) reconcile(ctx context.Context) error {
	held, err := x.cfg.Provider.List(ctx)
	if err != nil {
		return fmt.Errorf("run: list nodes: %w", err)
	}
	have := map[string]bool{}
	for _, n := range held {
		have[n.ID] = true
	}
	known := map[string]bool{}
	x.mu.Lock()
	lost := make([][]cloud.Node, len(x.st.Nodes))
	for b, nodes := range x.st.Nodes {
		for _, n := range nodes {
			if have[n.ID] {
				known[n.ID] = true
			} else {
				lost[b] = append(lost[b], n)
			}
		}
	}
	// Nodes an earlier driver was draining (interrupted) are of no use: they go now, or are
	// journaled gone if the provider took them meanwhile.
	draining := make([][]string, len(x.st.Nodes))
	for b, nodes := range x.st.Draining {
		for _, n := range nodes {
			draining[b] = append(draining[b], n.ID)
			known[n.ID] = true
		}
	}
	x.mu.Unlock()
	for b, ids := range draining {
		if len(ids) == 0 {
			continue
		}
		at := x.clk.Now()
		if err := x.cfg.Provider.Delete(ctx, ids); err != nil {
			return fmt.Errorf("run: release interrupted nodes: %w", err)
		}
		if err := x.record(journal.Event{Ev: journal.EvNodeOff, At: at, Bracket: b, Nodes: ids, Error: "released after its interruption", Cause: string(journal.NodeDrained)}, true); err != nil {
			return err
		}
	}
	for b, nodes := range lost {
		if len(nodes) > 0 {
			why := lostSet{}
			for _, n := range nodes {
				why[n.ID] = lostNode{why: "gone while no driver ran"}
			}
			fmt.Fprintf(x.log, "resume: the provider no longer holds %d node(s) of bracket %d\n", len(nodes), b)
			if err := x.recordLoss(b, nodes, why); err != nil {
				return err
			}
		}
	}
	var orphans []cloud.Node
	closed := map[int]bool{}
	for _, n := range held {
		if known[n.ID] {
			continue
		}
		switch b, fate := x.fateOf(n); fate {
		case closeRequest:
			fmt.Fprintf(x.log, "resume: node %s was rented by bracket %d's request, which will not be repeated (the bracket holds the nodes it wants): it is released\n", n.ID, b)
			orphans = append(orphans, n)
			closed[b] = true
		case adopt:
			fmt.Fprintf(x.log, "resume: bracket %d adopts node %s, rented by a driver that died before journaling it\n", b, n.ID)
			if err := x.record(journal.Event{Ev: journal.EvNodeUp, At: n.RunningAt, Bracket: b, Node: &n, Error: "adopted: rented by a driver that died before journaling it"}, true); err != nil {
				return err
			}
			known[n.ID] = true
		case leave:
			fmt.Fprintf(x.log, "resume: node %s is left to bracket %d's request that rented it, which is repeated\n", n.ID, b)
			known[n.ID] = true
		default:
			orphans = append(orphans, n)
		}
	}
	if len(orphans) > 0 {
		fmt.Fprintf(x.log, "resume: releasing nodes no bracket knows: %v\n", nodeIDs(orphans))
		if err := x.releaseUnknown(ctx, orphans); err != nil {
			return err
		}
	}
	// A request whose nodes went is answered: a later scale-up asks anew rather than repeat it.
	for b := range x.st.Brackets {
		if closed[b] {
			x.mu.Lock()
			tokens := x.st.OpenTokens(b)
			x.mu.Unlock()
			for _, token := range tokens {
				if err := x.record(journal.Event{Ev: journal.EvAnswer, Bracket: b, Token: token}, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// releaseUnknown releases nodes the provider holds for the run that the journal does not know
// (rented by a driver that died before journaling them), and journals what they billed: from
// their RunningAt to now, to the first bracket (the journal does not say whose they were). A
// node still starting never billed and is not journaled.
func (x *run) releaseUnknown(ctx context.Context, nodes []cloud.Node) error {
	at := x.clk.Now()
	if err := x.cfg.Provider.Delete(ctx, nodeIDs(nodes)); err != nil {
		return fmt.Errorf("run: release nodes the journal does not know: %w", err)
	}
	return x.journalOrphans(nodes, at)
}

// journalOrphans journals what nodes no bracket knew billed until their release at.
func (x *run) journalOrphans(nodes []cloud.Node, at time.Time) error {
	for _, n := range nodes {
		if n.RunningAt.IsZero() {
			continue
		}
		if err := x.record(journal.Event{Ev: journal.EvNodeUp, At: n.RunningAt, Node: &n, Error: "orphan: rented by a driver that died before journaling it"}, false); err != nil {
			return err
		}
		if err := x.record(journal.Event{Ev: journal.EvNodeOff, At: at, Nodes: []string{n.ID}, Error: "orphan released", Cause: string(journal.NodeOrphan)}, true); err != nil {
			return err
		}
	}
	return nil
}

func nodeIDs(nodes []cloud.Node) []string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return ids
}

// What reconcile does with a node the provider holds and the journal does not know.
type orphanFate int

const (
	release      orphanFate = iota
	adopt                   // into the bracket fateOf names
	leave                   // to the bracket whose request rented it: repeated, it hands the node back
	closeRequest            // released, and the request that rented it answered: it is not repeated
)

// fateOf decides an orphan's fate. A node that names the request it was rented under (Token) is
// left to the bracket whose request that is, if no answer to it was journaled and the bracket
// still wants more nodes than it holds (the repeated request hands it back); a bracket that holds
// what it wants does not repeat it, so the node goes and the request is closed (left, it would
// bill unjournaled); a node of no open request is released. For a provider that keeps no tokens, a running
// node goes to the first bracket whose current stage wants more nodes than it holds, and a
// pending one is left while a bracket has a request without an answer; anything else is
// released.
func (x *run) fateOf(n cloud.Node) (int, orphanFate) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n.Token != "" {
		for b := range x.st.Brackets {
			if slices.Contains(x.st.OpenTokens(b), n.Token) {
				if len(x.st.Nodes[b]) < x.wantNow(b) {
					return b, leave
				}
				return b, closeRequest
			}
		}
		return 0, release
	}
	for b := range x.st.Brackets {
		if len(x.st.Nodes[b]) >= x.wantNow(b) {
			continue
		}
		if open := len(x.st.Open[b]) > 0; n.RunningAt.IsZero() && open {
			return b, leave
		}
		if !n.RunningAt.IsZero() {
			return b, adopt
		}
	}
	return 0, release
}

// wantNow is how many nodes bracket b's current stage (its first not synced) wants; 0 once every
// stage synced. Callers hold x.mu.
func (x *run) wantNow(b int) int {
	if a := x.st.ASHA; a != nil { // one cluster, bracket 0's, at its phase's GPUs
		if b > 0 || x.st.Finished || len(a.PhaseAt) == 0 {
			return 0
		}
		return x.model.NodesFor(a.Plan.GPUs[len(a.PhaseAt)-1])
	}
	for k := range x.st.Brackets[b].Stages {
		if _, synced := x.st.Synced[runstate.StageKey{Bracket: b, Stage: k}]; !synced {
			return x.st.Plan[b][k].Nodes
		}
	}
	return 0
}

// maxInterruptions bounds how often one trial's gangs may lose a node in one stage before the
// trial gives up: a lost node is not the trial's fault, but a provider that loses every node must
// not keep a run renting forever.
const maxInterruptions = 10

// lostNodes is which of bracket b's nodes are gone or going, with why: the ones the provider no
// longer holds, and doomed (whose worker was told it is being interrupted), when b holds it.
func (x *run) lostNodes(ctx context.Context, b int, doomed *gang.InterruptedError) (lostSet, error) {
	held, err := x.cfg.Provider.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("run: list nodes: %w", err)
	}
	alive := map[string]bool{}
	for _, n := range held {
		alive[n.ID] = true
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	lost := lostSet{}
	for _, n := range x.st.Nodes[b] {
		switch {
		case doomed != nil && n.ID == doomed.Node:
			lost[n.ID] = lostNode{why: doomed.Reason, held: alive[n.ID]}
		case !alive[n.ID]:
			lost[n.ID] = lostNode{why: "the provider no longer holds it"}
		}
	}
	return lost, nil
}

// forget journals the loss of bracket b's lost nodes (an interruption for spot nodes, a node
// lost for the others: billing stops now). Releasing what is left of them is the caller's
// (releaseLost): gangs still running on a node being interrupted are saving their checkpoints.
func (x *run) forget(b int, lost lostSet) error {
	if len(lost) == 0 {
		return nil
	}
	x.mu.Lock()
	var nodes []cloud.Node
	for _, n := range x.st.Nodes[b] {
		if _, ok := lost[n.ID]; ok {
			nodes = append(nodes, n)
		}
	}
	x.mu.Unlock()
	return x.recordLoss(b, nodes, lost)
}

// releaseLost releases what is left of bracket b's nodes journaled as lost, so that they stop
// billing, and journals the release of those that were still held (interrupted, draining); a
// failure is said, not fatal: the run's end and a resumed driver release them again.
func (x *run) releaseLost(ctx context.Context, b int, ids []string) {
	if len(ids) == 0 {
		return
	}
	at := x.clk.Now()
	if err := x.cfg.Provider.Delete(context.WithoutCancel(ctx), ids); err != nil {
		fmt.Fprintf(x.log, "release lost nodes %v: %v\n", ids, err)
		return
	}
	x.mu.Lock()
	var held []string
	for _, n := range x.st.Draining[b] {
		if slices.Contains(ids, n.ID) {
			held = append(held, n.ID)
		}
	}
	x.mu.Unlock()
	if len(held) > 0 {
		x.record(journal.Event{Ev: journal.EvNodeOff, At: at, Bracket: b, Nodes: held, Error: "released after its interruption", Cause: string(journal.NodeDrained)}, true)
	}
}

// recordLoss journals nodes of bracket b gone or going for the reasons given by ID: nodes still
// held (being interrupted) as an interruption that bills until they are released, spot nodes
// gone as an interruption, the others as lost.
func (x *run) recordLoss(b int, nodes []cloud.Node, lost lostSet) error {
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
	if len(draining) > 0 {
		fmt.Fprintf(x.log, "node(s) being interrupted: %v (%s); replacing them, and releasing them once their gangs saved\n", draining, strings.Join(drainReasons, "; "))
		if err := x.record(journal.Event{Ev: journal.EvInterrupt, Bracket: b, Nodes: draining, Error: strings.Join(drainReasons, "; "), Draining: true}, true); err != nil {
			return err
		}
	}
	if len(spot) > 0 {
		fmt.Fprintf(x.log, "spot node(s) interrupted: %v (%s); replacing them\n", spot, strings.Join(reasons, "; "))
		if err := x.record(journal.Event{Ev: journal.EvInterrupt, Bracket: b, Nodes: spot, Error: strings.Join(reasons, "; ")}, true); err != nil {
			return err
		}
	}
	if len(other) > 0 {
		fmt.Fprintf(x.log, "nodes lost: %v; replacing them\n", other)
		if err := x.record(journal.Event{Ev: journal.EvNodeOff, Bracket: b, Nodes: other, Error: "lost", Cause: string(journal.NodeLost)}, true); err != nil {
			return err
		}
	}
	return nil
}

// lostOne says whether a launch of trial id ran on a node bracket b no longer holds.
func (x *run) lostOne(b int, id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	held := map[string]bool{}
	for _, n := range x.st.Nodes[b] {
		held[n.ID] = true
	}
	for _, n := range x.st.Trials[id].Nodes {
		if !held[n] {
			return true
		}
	}
	return false
}

// offerNow is the offer (an index in the model's Offers) bracket b's current stage (its first not
// synced) rents its nodes from; the default offer once every stage synced. Callers hold x.mu.
func (x *run) offerNow(b int) int {
	for k := range x.st.Brackets[b].Stages {
		if _, synced := x.st.Synced[runstate.StageKey{Bracket: b, Stage: k}]; !synced {
			o, _ := x.model.OfferIndex(x.st.Plan[b][k])
			return o
		}
	}
	return 0
}

// serves reports whether a node can serve a stage of offer want: it was rented from that offer
// (a node that names no offer the model knows is taken for the default one: a provider of one
// kind of node), or it is the on-demand node a provider fell back to for that type's spot
// market (cluster.spot.fallback), which a replacement must not churn.
func (x *run) serves(n cloud.Node, want int) bool {
	o, _ := x.model.OfferIndex(sim.StageAlloc{Type: n.InstanceType, Market: string(n.Market)})
	if o == want {
		return true
	}
	w := x.model.Offers[want]
	return w.Market == spec.MarketSpot && n.Market == cloud.OnDemand && x.model.Offers[o].Type == w.Type &&
		x.cfg.Experiment.Cluster.Spot.Fallback == spec.FallbackOnDemand
}

// nodePool is nodes of one offer (an index in the model's Offers) a stage wants held: count of
// them.
type nodePool struct{ offer, count int }

// poolsNow is what bracket b's current stage wants held, n nodes in all, by offer: all of its
// own offer; but a hedged stage (sim.StageAlloc.OnDemand, Proteus' reliability tiers) holds its
// on-demand nodes, of the same type on the on-demand market, first (up to n), and the rest on
// spot, as the simulator keeps its nodes per market. Callers hold x.mu.
func (x *run) poolsNow(b, n int) []nodePool {
	want := x.offerNow(b)
	sa, ok := x.stageNow(b)
	if !ok || sa.OnDemand <= 0 || n == 0 {
		return []nodePool{{want, n}}
	}
	od, ok := x.model.OnDemandOf(want)
	if !ok { // Check refuses such a plan; hold it in one market rather than fail here
		return []nodePool{{want, n}}
	}
	k := min(sa.OnDemand, n)
	return []nodePool{{od, k}, {want, n - k}}
}

// stageNow is bracket b's current stage's plan (its first not synced); false once every stage
// synced, and for ASHA (whose plan is phases, never hedged). Callers hold x.mu.
func (x *run) stageNow(b int) (sim.StageAlloc, bool) {
	if x.st.ASHA != nil {
		return sim.StageAlloc{}, false
	}
	for k := range x.st.Brackets[b].Stages {
		if _, synced := x.st.Synced[runstate.StageKey{Bracket: b, Stage: k}]; !synced {
			return x.st.Plan[b][k], true
		}
	}
	return sim.StageAlloc{}, false
}

// poolOf is the pool of pools a node counts in, given the nodes mine counts in each so far: the
// one of its own offer while it has room, else one it serves (serves) with room, else its own
// offer's (beyond its count: released as surplus); -1 for none.
func (x *run) poolOf(n cloud.Node, pools []nodePool, mine [][]cloud.Node) int {
	for pass := range 3 {
		if i := x.poolIn(n, pools, mine, pass, nil); i >= 0 {
			return i
		}
	}
	return -1
}

// poolIn is poolOf's pass: 0, a pool of the node's own offer with room; 1, one it serves with
// room (a hedged stage's on-demand node, in odTier, serves none but its own); 2, one of its own
// offer, room or not (its surplus: the least used go).
func (x *run) poolIn(n cloud.Node, pools []nodePool, mine [][]cloud.Node, pass int, odTier map[string]bool) int {
	o, known := x.model.OfferIndex(sim.StageAlloc{Type: n.InstanceType, Market: string(n.Market)})
	for i, p := range pools {
		room := len(mine[i]) < p.count
		switch {
		case pass == 0 && known && p.offer == o && room,
			pass == 1 && !odTier[n.ID] && x.serves(n, p.offer) && room,
			pass == 2 && known && p.offer == o:
			return i
		}
	}
	return -1
}

// sortPools counts held nodes in pools (poolOf), each pass over every node before the next:
// a node of a pool's own offer takes its room before one that only serves it (an on-demand node a
// hedged stage held, kept by the spot stage after it, would bill at the on-demand price where
// the simulator keeps spot nodes and releases it). The nodes no pool takes are other.
func (x *run) sortPools(held []cloud.Node, pools []nodePool) (mine [][]cloud.Node, other []string) {
	x.mu.Lock()
	odTier := maps.Clone(x.st.ODTier)
	x.mu.Unlock()
	mine = make([][]cloud.Node, len(pools))
	taken := make([]bool, len(held))
	for pass := range 3 {
		for j, n := range held {
			if taken[j] {
				continue
			}
			if i := x.poolIn(n, pools, mine, pass, odTier); i >= 0 {
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

// scaleTo brings bracket b to n nodes of its current stage's instance type and market (a hedged
// stage's: its on-demand nodes and the rest spot, poolsNow): nodes that cannot serve it (serves)
// go first, all of them (a stage on another offer starts its own, as the simulator has it); then,
// in each market, the least used nodes under the last placement are released (bin-packing before
// scale-down); new ones are created, one request per market.
func (x *run) scaleTo(ctx context.Context, b, n int, last placement.Placement) (placement.Placement, error) {
	return x.scale(ctx, b, n, last, true)
}

// shrinkTo is scaleTo without the new nodes: what bracket b's next stage does not need goes
// before the stage starts (its cost the stage before's, as the simulator bills it), and what it
// needs anew is asked for once it has started, in its own window.
func (x *run) shrinkTo(ctx context.Context, b, n int, last placement.Placement) (placement.Placement, error) {
	return x.scale(ctx, b, n, last, false)
}

// scale is scaleTo, creating nodes when create.
func (x *run) scale(ctx context.Context, b, n int, last placement.Placement, create bool) (placement.Placement, error) {
	x.mu.Lock()
	held := append([]cloud.Node(nil), x.st.Nodes[b]...)
	pools := x.poolsNow(b, n)
	own := x.offerNow(b)
	x.mu.Unlock()
	mine, other := x.sortPools(held, pools)
	if n == 0 {
		mine, other = make([][]cloud.Node, len(pools)), nodeIDs(held)
	}
	if len(other) > 0 {
		if err := x.releaseNodes(ctx, b, other, last); err != nil {
			return last, err
		}
	}
	for i, p := range pools {
		if len(mine[i]) > p.count {
			drop := placement.Release(toPlacementNodes(mine[i]), p.count, last)
			if err := x.releaseNodes(ctx, b, drop, last); err != nil {
				return last, err
			}
			mine[i] = slices.DeleteFunc(mine[i], func(node cloud.Node) bool { return slices.Contains(drop, node.ID) })
		}
	}
	// A request a dead driver left open is repeated first, in the market it asked: it hands back
	// what it rented then, less what the journal knows already; whatever is still missing is
	// asked for anew. A hedged stage's markets are asked at once, as the simulator starts a
	// stage's new nodes together (one after the other, the second market's nodes came a whole
	// SCALE and INIT later).
	asked := make([]bool, len(pools)) // a new request was made for the pool: none again
	for create {
		var asks []nodeAsk
		x.mu.Lock()
		for i, p := range pools {
			market := x.requestMarket(p.offer, own)
			token, repeat := x.st.Open[b][market]
			if len(mine[i]) >= p.count || (asked[i] && !repeat) {
				continue
			}
			asks = append(asks, nodeAsk{pool: i, count: p.count - len(mine[i]), market: market, token: token, repeat: repeat})
		}
		x.mu.Unlock()
		if len(asks) == 0 {
			break
		}
		for j := range asks {
			if err := x.journalRequest(b, &asks[j]); err != nil {
				return last, err
			}
			asked[asks[j].pool] = asked[asks[j].pool] || !asks[j].repeat
		}
		answers := x.createAll(ctx, b, asks)
		var firstErr error
		for j, a := range asks {
			created := answers[j].fresh
			for k := range created {
				up := journal.Event{Ev: journal.EvNodeUp, At: created[k].RunningAt, Bracket: b, Node: &created[k]}
				if a.market == spec.MarketOnDemand && created[k].Market == cloud.OnDemand {
					up.Tier = spec.MarketOnDemand
				}
				if jerr := x.record(up, true); jerr != nil {
					// The journal cannot hold them: release them rather than leave them billing.
					var ids []string
					for _, c := range created[k:] {
						ids = append(ids, c.ID)
					}
					for _, later := range answers[j+1:] {
						ids = append(ids, nodeIDs(later.fresh)...)
					}
					x.cfg.Provider.Delete(context.WithoutCancel(ctx), ids)
					return last, jerr
				}
				if i := x.poolOf(created[k], pools, mine); i >= 0 {
					mine[i] = append(mine[i], created[k])
				}
			}
			// After the nodes: a driver that dies before this repeats the request, which is safe.
			err := answers[j].err
			if jerr := x.record(journal.Event{Ev: journal.EvAnswer, Bracket: b, Token: a.token}, false); jerr != nil && err == nil {
				err = jerr
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("run: create nodes: %w", err)
			}
		}
		if firstErr != nil {
			return last, firstErr
		}
	}
	return last, nil
}

// nodeAsk is one request for nodes of a scale-up: count nodes for pool (an index in poolsNow's
// pools) in market (as journaled: "" for the stage's own), under token; repeat when it repeats
// a request a dead driver left open.
type nodeAsk struct {
	pool, count int
	market      string
	token       string
	repeat      bool
}

// nodeAnswer is what the provider gave for a nodeAsk: the nodes the journal does not know yet,
// and why it gave no more.
type nodeAnswer struct {
	fresh []cloud.Node
	err   error
}

// journalRequest journals a new request (its token made here) before it is sent; a repeated one
// was journaled by the driver that first sent it.
func (x *run) journalRequest(b int, a *nodeAsk) error {
	if a.repeat {
		return nil
	}
	x.mu.Lock()
	a.token = fmt.Sprintf("b%d-r%d", b, x.st.Requests[b]+1)
	x.mu.Unlock()
	return x.record(journal.Event{Ev: journal.EvRequest, Bracket: b, Count: a.count, Token: a.token, Market: a.market}, true)
}

// createAll sends asks to the provider, all at once when there are several (each in an actor of
// its own, so that virtual time sees them together), and returns their answers in asks' order.
func (x *run) createAll(ctx context.Context, b int, asks []nodeAsk) []nodeAnswer {
	answers := make([]nodeAnswer, len(asks))
	if len(asks) == 1 {
		answers[0] = x.create(ctx, b, asks[0])
		return answers
	}
	type indexed struct {
		j int
		a nodeAnswer
	}
	q := clock.NewQueue[indexed](x.clk)
	for j, a := range asks {
		x.clk.Go(fmt.Sprintf("create b%d %s", b, a.token), func() { q.Put(indexed{j, x.create(ctx, b, a)}) })
	}
	for range asks {
		got, _ := q.Get(context.WithoutCancel(ctx)) // each create ends, cancelled or not
		answers[got.j] = got.a
	}
	return answers
}

// requestMarket is how a request for offer o is journaled (Event.Market) while the stage's own
// offer is own: "" for own, else o's market (a hedged stage's on-demand nodes).
func (x *run) requestMarket(o, own int) string {
	if o == own {
		return ""
	}
	return x.model.Offers[o].Market
}

// releaseNodes releases nodes of bracket b, journals it, and forgets the placements on them.
func (x *run) releaseNodes(ctx context.Context, b int, release []string, last placement.Placement) error {
	at := x.clk.Now() // billing stops when the release is asked for, not when the node is gone
	if err := x.cfg.Provider.Delete(ctx, release); err != nil {
		return fmt.Errorf("run: release nodes: %w", err)
	}
	if err := x.record(journal.Event{Ev: journal.EvNodeOff, At: at, Bracket: b, Nodes: release, Cause: string(journal.NodeReleased)}, true); err != nil {
		return err
	}
	for t, slots := range last {
		for _, s := range slots {
			if slices.Contains(release, s.Node) {
				delete(last, t)
			}
		}
	}
	return nil
}

// create asks the provider for a's nodes for bracket b under a's journaled token: a request a
// dead driver journaled but got no answer for is repeated under its own token, in the market it
// asked (Event.Market), so that a provider that rents (EC2) hands back what it rented then
// instead of renting again. Nodes the journal knows already are left out of what it returns.
func (x *run) create(ctx context.Context, b int, a nodeAsk) nodeAnswer {
	x.mu.Lock()
	offer := x.model.Offers[x.offerNow(b)]
	x.mu.Unlock()
	typ, market := offer.Type, a.market
	if market == "" {
		market = offer.Market
	}
	if typ == "" { // the cluster names no type: ask for what the provider has
		typ = x.cfg.Experiment.Cluster.InstanceType
	}
	created, err := x.cfg.Provider.Create(ctx, cloud.Request{Count: a.count, InstanceType: typ, Market: cloud.Market(market), Token: a.token})
	// A repeated request hands back every node it rented: those the journal knows already (held,
	// released, lost) are not fresh. A new request's nodes all are, but one a bracket holds (a
	// provider that gives a node it holds twice); a node released before may come again under
	// its ID (a team's Nomad client, claimed anew).
	x.mu.Lock()
	defer x.mu.Unlock()
	held := map[string]bool{}
	for _, n := range x.st.Held() {
		held[n.ID] = true
	}
	var fresh []cloud.Node
	for _, n := range created {
		if !held[n.ID] && !(a.repeat && x.st.Known[n.ID]) {
			fresh = append(fresh, n)
		}
	}
	return nodeAnswer{fresh: fresh, err: err}
}

// releaseAll releases every node the run holds, and every node the provider holds for it that
// the journal does not know, then journals the release. The release comes first: a journal
// that cannot be written (a full disk) must not keep nodes billing; that is printed, and a
// resumed driver's reconcile finds them gone.
func (x *run) releaseAll(ctx context.Context, why string) error {
	x.mu.Lock()
	held := make([][]string, len(x.st.Nodes))
	known := map[string]bool{}
	for b, nodes := range x.st.Nodes {
		for _, n := range append(append([]cloud.Node(nil), nodes...), x.st.Draining[b]...) {
			held[b] = append(held[b], n.ID)
			known[n.ID] = true
		}
	}
	x.mu.Unlock()
	var ids []string
	for _, h := range held {
		ids = append(ids, h...)
	}
	var unknown []cloud.Node
	if listed, err := x.cfg.Provider.List(ctx); err == nil {
		for _, n := range listed {
			if !known[n.ID] {
				ids = append(ids, n.ID)
				unknown = append(unknown, n)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	at := x.clk.Now()
	if err := x.cfg.Provider.Delete(ctx, ids); err != nil {
		return fmt.Errorf("release nodes %v: %w", ids, err)
	}
	fmt.Fprintf(x.log, "released %d node(s): %v\n", len(ids), ids)
	for b, h := range held {
		if len(h) == 0 {
			continue
		}
		if err := x.record(journal.Event{Ev: journal.EvNodeOff, At: at, Bracket: b, Nodes: h, Error: why, Cause: string(journal.NodeReleased)}, true); err != nil {
			fmt.Fprintf(x.log, "released nodes %v but could not journal it: %v\n", h, err)
			return err
		}
	}
	if err := x.journalOrphans(unknown, at); err != nil {
		fmt.Fprintf(x.log, "released nodes %v but could not journal what they billed: %v\n", nodeIDs(unknown), err)
		return err
	}
	return nil
}

func toPlacementNodes(nodes []cloud.Node) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = placement.Node{ID: n.ID, GPUs: n.GPUs}
	}
	return out
}
