package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"

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
//
// What to do with nodes is decided by decideNodes (nodes_decide.go), from a copy of what the run
// knows (nodeView); this file is the acting: it asks the provider and writes the journal
// (actNodes, and rent for new nodes), and nothing else here decides.

// reconcile makes the nodes the journal says are held agree with what the provider holds
// (decideNodes' neListed).
func (x *run) reconcile(ctx context.Context) error {
	held, err := x.cfg.Provider.List(ctx)
	if err != nil {
		return fmt.Errorf("run: list nodes: %w", err)
	}
	return x.actNodes(ctx, decideNodes(x.offers(), x.nodeView(), nodeEvent{kind: neListed, listed: held}), nil)
}

// maxInterruptions bounds how often one trial's gangs may lose a node in one stage before the
// trial gives up: a lost node is not the trial's fault, but a provider that loses every node must
// not keep a run renting forever.
const maxInterruptions = 10

// lostNodes is which of bracket b's nodes are gone or going, with why (lostOf), as the provider
// lists them now.
//
// Only a node held before the List began can be missing from it: one rented while the List ran
// (another gang's replacement, a new stage's) is not in its answer, and is not lost. (Seen on
// Kubernetes, whose pool provider reads every node in List: a replacement claimed meanwhile was
// journaled as interrupted.)
func (x *run) lostNodes(ctx context.Context, b int, doomed *gang.InterruptedError) (lostSet, error) {
	x.mu.Lock()
	before := map[string]bool{}
	for _, n := range x.st.Nodes[b] {
		before[n.ID] = true
	}
	x.mu.Unlock()
	listed, err := x.cfg.Provider.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("run: list nodes: %w", err)
	}
	x.mu.Lock()
	held := slices.DeleteFunc(slices.Clone(x.st.Nodes[b]), func(n cloud.Node) bool { return !before[n.ID] })
	x.mu.Unlock()
	return lostOf(held, listed, doomed), nil
}

// forget journals the loss of bracket b's lost nodes (an interruption for spot nodes, a node
// lost for the others: billing stops now). Releasing what is left of them is the caller's
// (releaseLost): gangs still running on a node being interrupted are saving their checkpoints.
func (x *run) forget(ctx context.Context, b int, lost lostSet) error {
	if len(lost) == 0 {
		return nil
	}
	return x.actNodes(ctx, decideNodes(x.offers(), x.nodeView(), nodeEvent{kind: neLost, bracket: b, lost: lost}), nil)
}

// releaseLost releases what is left of bracket b's nodes journaled as lost, so that they stop
// billing, and journals the release of those that were still held (interrupted, draining); a
// failure is said, not fatal: the run's end and a resumed driver release them again.
func (x *run) releaseLost(ctx context.Context, b int, ids []string) {
	if len(ids) == 0 {
		return
	}
	x.actNodes(ctx, decideNodes(x.offers(), x.nodeView(), nodeEvent{kind: neDrained, bracket: b, ids: ids}), nil)
}

// retire releases bracket b's nodes ids, which no gang uses any more, and journals it.
func (x *run) retire(ctx context.Context, b int, ids []string) error {
	return x.actNodes(ctx, decideNodes(x.offers(), x.nodeView(), nodeEvent{kind: neRetire, bracket: b, ids: ids}), nil)
}

// releaseAll releases every node the run holds, and every node the provider holds for it that
// the journal does not know, then journals the release. The release comes first: a journal
// that cannot be written (a full disk) must not keep nodes billing; that is printed, and a
// resumed driver's reconcile finds them gone.
func (x *run) releaseAll(ctx context.Context, why string) error {
	var listed []cloud.Node
	if l, err := x.cfg.Provider.List(ctx); err == nil {
		listed = l
	}
	return x.actNodes(ctx, decideNodes(x.offers(), x.nodeView(), nodeEvent{kind: neEnd, listed: listed, why: why}), nil)
}

// scaleTo brings bracket b to n nodes of its current stage's instance type and market
// (decideNodes' neScale), asking for what is missing until every pool was asked anew once.
func (x *run) scaleTo(ctx context.Context, b, n int, last placement.Placement) (placement.Placement, error) {
	return x.scale(ctx, b, n, last, true)
}

// shrinkTo is scaleTo without the new nodes: what bracket b's next stage does not need goes
// before the stage starts (its cost the stage before's, as the simulator bills it), and what it
// needs anew is asked for once it has started, in its own window.
func (x *run) shrinkTo(ctx context.Context, b, n int, last placement.Placement) (placement.Placement, error) {
	return x.scale(ctx, b, n, last, false)
}

// scale is scaleTo, creating nodes when create. A request a dead driver left open is repeated
// first; what is still missing once it is answered is asked for anew (neAnswered). Scales of a
// bracket may run at once (a replacement asked for while another is out): each decides and
// sends its requests, and journals their answers, holding renting, and counts the nodes of
// the others' requests out as coming.
func (x *run) scale(ctx context.Context, b, n int, last placement.Placement, create bool) (placement.Placement, error) {
	o := x.offers()
	e := nodeEvent{kind: neScale, bracket: b, count: n, create: create, last: last}
	asked := map[int]bool{}
	for {
		x.renting.Get(context.WithoutCancel(ctx)) // held briefly: a cancelled scale still releases
		acts := decideNodes(o, x.nodeView(), e)
		var asks []nodeAsk
		for _, a := range acts {
			if a.kind == naAsk {
				asks = append(asks, a.ask)
				asked[a.ask.pool] = asked[a.ask.pool] || !a.ask.repeat
			}
		}
		err := x.actNodes(ctx, acts, last)
		if err == nil && len(asks) > 0 {
			err = x.send(b, asks)
		}
		x.renting.Put(struct{}{})
		if err != nil || len(asks) == 0 {
			return last, err
		}
		if err := x.await(ctx, b, asks); err != nil {
			return last, err
		}
		e = nodeEvent{kind: neAnswered, bracket: b, count: n, create: create, asked: maps.Clone(asked)}
	}
}

// offers is what node decisions read of the run's model and spec.
func (x *run) offers() offers {
	return offers{model: x.model, fallback: x.cfg.Experiment.Cluster.Spot.Fallback == spec.FallbackOnDemand}
}

// nodeView is a copy of what node decisions read of the run's state.
func (x *run) nodeView() nodeView {
	x.mu.Lock()
	defer x.mu.Unlock()
	v := nodeView{brackets: make([]bracketNodes, len(x.st.Nodes)), odTier: maps.Clone(x.st.ODTier)}
	for b := range x.st.Nodes {
		bn := bracketNodes{held: slices.Clone(x.st.Nodes[b]), draining: slices.Clone(x.st.Draining[b]), open: maps.Clone(x.st.Open[b]),
			coming: map[string]int{}, flying: map[string]bool{}}
		for token, f := range x.flying {
			if f.bracket == b {
				bn.coming[f.market] += f.count
				bn.flying[token] = true
			}
		}
		if b < len(x.st.Brackets) {
			bn.want, bn.own = x.wantNow(b), x.offerNow(b)
			bn.stage, bn.staged = x.stageNow(b)
		}
		v.brackets[b] = bn
	}
	return v
}

// actNodes does what decideNodes said, in order, but the requests for new nodes (naAsk: scale
// sends them, then awaits them): the provider is asked first, then the journal written (here
// and in send and await only). The first error ends it; a best-effort release's is said
// instead. Releases forget the placements of last on their nodes.
func (x *run) actNodes(ctx context.Context, acts []nodeAction, last placement.Placement) error {
	for _, a := range acts {
		switch a.kind {
		case naLog:
			fmt.Fprint(x.log, a.text)
		case naRecord:
			for _, e := range a.records {
				if err := x.record(e, e.Ev != journal.EvAnswer); err != nil {
					return err
				}
			}
		case naRelease:
			if err := x.release(ctx, a, last); err != nil {
				return err
			}
		}
	}
	return nil
}

// release does a naRelease: billing stops when the release is asked for, not when the node is
// gone, so that is the moment journaled.
func (x *run) release(ctx context.Context, a nodeAction, last placement.Placement) error {
	at := x.clk.Now()
	if a.bestEffort {
		ctx = context.WithoutCancel(ctx)
	}
	if err := x.cfg.Provider.Delete(ctx, a.ids); err != nil {
		if a.bestEffort {
			fmt.Fprintf(x.log, "release lost nodes %v: %v\n", a.ids, err)
			return nil
		}
		return fmt.Errorf("run: release nodes %v: %w", a.ids, err)
	}
	fmt.Fprint(x.log, a.text)
	forgetPlacementsOn(last, a.ids)
	for _, e := range a.records {
		e.At = at
		if err := x.record(e, true); err != nil {
			fmt.Fprintf(x.log, "released nodes %v but could not journal it: %v\n", e.Nodes, err)
			return err
		}
	}
	// Nodes no bracket knew billed from their start until now: journaled to the first bracket
	// (the journal does not say whose they were). A node still starting never billed.
	for _, n := range a.orphans {
		if n.RunningAt.IsZero() {
			continue
		}
		err := x.record(journal.Event{Ev: journal.EvNodeUp, At: n.RunningAt, Node: &n, Error: "orphan: rented by a driver that died before journaling it"}, false)
		if err == nil {
			err = x.record(journal.Event{Ev: journal.EvNodeOff, At: at, Nodes: []string{n.ID}, Error: "orphan released", Cause: string(journal.NodeOrphan)}, true)
		}
		if err != nil {
			fmt.Fprintf(x.log, "released nodes %v but could not journal what they billed: %v\n", nodeIDs(a.orphans), err)
			return err
		}
	}
	return nil
}

// send journals a scale's requests for bracket b, each new one before it is sent (its token made
// here; a driver that dies before the answer repeats the request, which is safe), and marks them
// out (flying), in place. The caller holds renting.
func (x *run) send(b int, asks []nodeAsk) error {
	for j := range asks {
		if err := x.journalRequest(b, &asks[j]); err != nil {
			return err
		}
	}
	x.mu.Lock()
	for _, a := range asks {
		x.flying[a.token] = flight{bracket: b, count: a.count, market: a.market}
	}
	x.mu.Unlock()
	return nil
}

// await sends the requests send journaled, all at once, then journals the fresh nodes they
// rented, each request's answer after its nodes, holding renting (a scale deciding meanwhile
// sees each node either coming or held, never both or neither).
func (x *run) await(ctx context.Context, b int, asks []nodeAsk) error {
	answers := x.createAll(ctx, b, asks)
	x.renting.Get(context.WithoutCancel(ctx)) // what was rented is journaled, cancelled or not
	defer x.renting.Put(struct{}{})
	defer func() {
		x.mu.Lock()
		for _, a := range asks {
			delete(x.flying, a.token)
		}
		x.mu.Unlock()
	}()
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
				return jerr
			}
		}
		err := answers[j].err
		if jerr := x.record(journal.Event{Ev: journal.EvAnswer, Bracket: b, Token: a.token}, false); jerr != nil && err == nil {
			err = jerr
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("run: create nodes: %w", err)
		}
	}
	return firstErr
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
