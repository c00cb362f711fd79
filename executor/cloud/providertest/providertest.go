package providertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Harness makes the providers under test.
type Harness struct {
	// New returns a provider on fresh state, and a function that opens another provider on the
	// same state, as a resumed driver does; nil when the provider keeps no state.
	New func(t *testing.T) (p cloud.Provider, reopen func(t *testing.T) cloud.Provider)
	// GPUsPerNode is what every node of the providers has.
	GPUsPerNode int
	// Offer is the instance type, market and price the providers were set up to rent.
	Offer cloud.Offer
	// CancelAfter is how long into a Create the suite cancels its context, to catch the provider
	// half way (0: only the case of a context cancelled before Create).
	CancelAfter time.Duration
	// Reclaims says the provider's nodes are machines that exist before and after it holds them
	// (nomadpool claims a team's Nomad clients): a node it released may be given again under its
	// own ID, so a reopened provider is held only to never giving a node it holds.
	Reclaims bool
	// Tokens says the provider honours request tokens (cloud.Request.Token): a request repeated
	// under its token rents nothing new, and List names each node's token.
	Tokens bool
	// Clock is the providers' time (default the wall clock); Within runs each case's body, as an
	// actor when the clock is a Sim (default: at once).
	Clock  clock.Clock
	Within func(t *testing.T, f func(ctx context.Context))
}

func (h Harness) clock() clock.Clock { return clock.Or(h.Clock) }

// within runs a case's body as the harness says.
func (h Harness) within(t *testing.T, f func(ctx context.Context)) {
	if h.Within == nil {
		f(context.Background())
		return
	}
	h.Within(t, f)
}

// Run runs the whole contract, one subtest per case.
func Run(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, h Harness, ctx context.Context)
	}{
		{"CreateRunningNodes", createRunningNodes},
		{"ListIsWhatIsHeld", listIsWhatIsHeld},
		{"DeleteReleases", deleteReleases},
		{"ReopenFindsHeld", reopenFindsHeld},
		{"CreateCancelled", createCancelled},
		{"NodesCarryTheirOffer", nodesCarryTheirOffer},
		{"RepeatedTokenRentsNothingTwice", repeatedTokenRentsNothingTwice},
	} {
		t.Run(c.name, func(t *testing.T) { h.within(t, func(ctx context.Context) { c.run(t, h, ctx) }) })
	}
}

// A request repeated under its token hands back what the first one rented, and rents nothing
// new; List names each node's token; another token rents anew.
func repeatedTokenRentsNothingTwice(t *testing.T, h Harness, ctx context.Context) {
	if !h.Tokens {
		t.Skip("this provider does not honour request tokens")
	}
	p, _ := h.open(t)
	{
		first, err := p.Create(ctx, cloud.Request{Count: 2, Token: "rt-1"})
		if err != nil || len(first) != 2 {
			t.Fatalf("create: %v, %v", first, err)
		}
		again, err := p.Create(ctx, cloud.Request{Count: 2, Token: "rt-1"})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := ids(first), ids(again); !slices.Equal(sorted(a), sorted(b)) {
			t.Fatalf("the repeated request gave %v, the first %v", b, a)
		}
		listed, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed) != 2 {
			t.Fatalf("the provider holds %v after a request and its repeat", ids(listed))
		}
		for _, n := range listed {
			if n.Token != "rt-1" {
				t.Errorf("node %s lists token %q, want rt-1", n.ID, n.Token)
			}
		}
		other, err := p.Create(ctx, cloud.Request{Count: 1, Token: "rt-2"})
		if err != nil || len(other) != 1 || slices.Contains(ids(first), other[0].ID) {
			t.Fatalf("another token gave %v, %v; want one new node", other, err)
		}
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// open is h.New with a cleanup that releases whatever the provider still holds.
func (h Harness) open(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
	p, reopen := h.New(t)
	releaseAtEnd(t, p)
	if reopen == nil {
		return p, nil
	}
	return p, func(t *testing.T) cloud.Provider {
		q := reopen(t)
		releaseAtEnd(t, q)
		return q
	}
}

func releaseAtEnd(t *testing.T, p cloud.Provider) {
	t.Cleanup(func() {
		held, err := p.List(context.Background())
		if err == nil && len(held) > 0 {
			p.Delete(context.Background(), ids(held))
		}
	})
}

// Create returns running nodes with distinct IDs, the configured GPUs, an address, and when they
// started running; creating none is nothing.
func createRunningNodes(t *testing.T, h Harness, ctx context.Context) {
	p, _ := h.open(t)
	if nodes, err := p.Create(ctx, cloud.Request{Count: 0}); err != nil || len(nodes) != 0 {
		t.Fatalf("create 0: %v, %v", nodes, err)
	}
	before := h.clock().Now()
	nodes, err := p.Create(ctx, cloud.Request{Count: 2})
	after := h.clock().Now()
	if err != nil || len(nodes) != 2 {
		t.Fatalf("create 2: %v, %v", nodes, err)
	}
	if nodes[0].ID == "" || nodes[0].ID == nodes[1].ID {
		t.Errorf("node IDs %q and %q: want two distinct ones", nodes[0].ID, nodes[1].ID)
	}
	for _, n := range nodes {
		if n.GPUs != h.GPUsPerNode || n.Addr == "" {
			t.Errorf("node %+v: want %d GPUs and an address", n, h.GPUsPerNode)
		}
		if n.RunningAt.Before(before) || n.RunningAt.After(after) {
			t.Errorf("node %s running at %v, outside its Create (%v to %v)", n.ID, n.RunningAt, before, after)
		}
	}
}

// List returns exactly the nodes held, and IDs are never reused.
func listIsWhatIsHeld(t *testing.T, h Harness, ctx context.Context) {
	p, _ := h.open(t)
	want := held(t, p)
	if len(want) != 0 {
		t.Fatalf("a fresh provider holds %v", want)
	}
	for _, n := range []int{2, 1} {
		nodes, err := p.Create(ctx, cloud.Request{Count: n})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids(nodes) {
			if slices.Contains(want, id) {
				t.Fatalf("node ID %s given twice", id)
			}
			want = append(want, id)
		}
		slices.Sort(want)
		if got := held(t, p); !slices.Equal(got, want) {
			t.Fatalf("list %v after creating %v", got, want)
		}
	}
}

// Delete releases the nodes named; unknown and already deleted IDs, or none, are not an error.
func deleteReleases(t *testing.T, h Harness, ctx context.Context) {
	p, _ := h.open(t)
	nodes, err := p.Create(ctx, cloud.Request{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, []string{nodes[0].ID}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := held(t, p); !slices.Equal(got, []string{nodes[1].ID}) {
		t.Fatalf("list %v after deleting %s of %v", got, nodes[0].ID, ids(nodes))
	}
	for _, again := range [][]string{{nodes[0].ID}, {"no-such-node"}, nil} {
		if err := p.Delete(ctx, again); err != nil {
			t.Errorf("delete %v: %v, want nil", again, err)
		}
	}
	if err := p.Delete(ctx, []string{nodes[1].ID}); err != nil {
		t.Fatal(err)
	}
	if got := held(t, p); len(got) != 0 {
		t.Fatalf("list %v after deleting every node", got)
	}
}

// A provider opened on an earlier one's state finds what it held (a resumed driver releases what
// a dead one rented), and gives new nodes new IDs (or, one that Reclaims, never a held one's).
func reopenFindsHeld(t *testing.T, h Harness, ctx context.Context) {
	p, reopen := h.open(t)
	if reopen == nil {
		t.Skip("this provider keeps no state")
	}
	nodes, err := p.Create(ctx, cloud.Request{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, []string{nodes[0].ID}); err != nil {
		t.Fatal(err)
	}
	q := reopen(t)
	if got := held(t, q); !slices.Equal(got, []string{nodes[1].ID}) {
		t.Fatalf("the reopened provider holds %v, want [%s]", got, nodes[1].ID)
	}
	more, err := q.Create(ctx, cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if more[0].ID == nodes[1].ID || (!h.Reclaims && more[0].ID == nodes[0].ID) {
		t.Fatalf("the reopened provider reused node ID %s", more[0].ID)
	}
	if err := q.Delete(ctx, []string{nodes[1].ID, more[0].ID}); err != nil {
		t.Fatal(err)
	}
	if got := held(t, q); len(got) != 0 {
		t.Fatalf("the reopened provider still holds %v", got)
	}
}

// inconclusive is how soon after its cancel a Create may end without noticing it: it was in its
// last step.
const inconclusive = 100 * time.Millisecond

// A Create whose context is cancelled, before it or half way, returns an error that says so
// with the nodes that did come up, and holds nothing else: the caller can release all of it.
func createCancelled(t *testing.T, h Harness, ctx context.Context) {
	for _, c := range []struct {
		name  string
		after time.Duration
	}{{"before", 0}, {"during", h.CancelAfter}} {
		variant := func(t *testing.T) {
			if c.name == "during" && c.after == 0 {
				t.Skip("the harness sets no CancelAfter")
			}
			p, _ := h.open(t)
			cctx, cancel := clock.WithCancel(h.clock(), ctx)
			var mu sync.Mutex
			var cancelledAt time.Time
			stop := func() {
				mu.Lock()
				if cancelledAt.IsZero() {
					cancelledAt = h.clock().Now()
				}
				mu.Unlock()
				cancel()
			}
			if c.after == 0 {
				stop()
			} else {
				h.clock().AfterFunc(c.after, stop)
			}
			nodes, err := p.Create(cctx, cloud.Request{Count: 2})
			returned := h.clock().Now()
			mu.Lock()
			at := cancelledAt
			mu.Unlock()
			cancel()
			if at.IsZero() || (err == nil && returned.Sub(at) < inconclusive) {
				// Real machines came up before the cancel, or as it came: nothing to hold the
				// provider to this time.
				t.Skipf("Create ended (%v) before its cancel took effect: inconclusive", err)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("create with a cancelled context: %v, %v; want an error wrapping context.Canceled", nodes, err)
			}
			t.Logf("the cancelled Create returned %d node(s) with %v", len(nodes), err)
			got, gave := held(t, p), ids(nodes)
			slices.Sort(gave)
			if !slices.Equal(got, gave) {
				t.Fatalf("the provider holds %v, the cancelled Create returned %v: they must be the same", got, gave)
			}
			if err := p.Delete(ctx, gave); err != nil {
				t.Fatal(err)
			}
			if got := held(t, p); len(got) != 0 {
				t.Fatalf("after releasing what came up the provider holds %v", got)
			}
		}
		if h.Within != nil { // an actor cannot wait on a subtest: the variants run in line
			t.Logf("%s:", c.name)
			variant(t)
			continue
		}
		t.Run(c.name, variant)
	}
}

// held is the sorted IDs of what p lists.
func held(t *testing.T, p cloud.Provider) []string {
	t.Helper()
	nodes, err := p.List(context.Background())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	out := ids(nodes)
	slices.Sort(out)
	return out
}

func ids(nodes []cloud.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// A node carries the instance type, market and price it is rented at (what the meter bills); a
// request for a type or market the provider does not offer is a *cloud.CapacityError and rents
// nothing.
func nodesCarryTheirOffer(t *testing.T, h Harness, ctx context.Context) {
	p, _ := h.open(t)
	nodes, err := p.Create(ctx, cloud.Request{Count: 1, InstanceType: h.Offer.InstanceType, Market: h.Offer.Market})
	if err != nil || len(nodes) != 1 {
		t.Fatalf("create: %v, %v", nodes, err)
	}
	if n := nodes[0]; n.InstanceType != h.Offer.InstanceType || n.Market != h.Offer.Market || n.PricePerHour != h.Offer.PricePerHour {
		t.Fatalf("node %+v, offer %+v", n, h.Offer)
	}
	for _, req := range []cloud.Request{{Count: 1, InstanceType: "no-such-type"}, {Count: 1, Market: "no-such-market"}} {
		nodes, err := p.Create(ctx, req)
		var capacity *cloud.CapacityError
		if !errors.As(err, &capacity) || len(nodes) != 0 {
			t.Fatalf("create %+v: %v, %v; want a *cloud.CapacityError and no node", req, nodes, err)
		}
	}
	if got := held(t, p); len(got) != 1 {
		t.Fatalf("held %v after refused requests", got)
	}
}
