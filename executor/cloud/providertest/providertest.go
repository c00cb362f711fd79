package providertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

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
}

// Run runs the whole contract, one subtest per case.
func Run(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"CreateRunningNodes", createRunningNodes},
		{"ListIsWhatIsHeld", listIsWhatIsHeld},
		{"DeleteReleases", deleteReleases},
		{"ReopenFindsHeld", reopenFindsHeld},
		{"CreateCancelled", createCancelled},
		{"NodesCarryTheirOffer", nodesCarryTheirOffer},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
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
func createRunningNodes(t *testing.T, h Harness) {
	p, _ := h.open(t)
	ctx := context.Background()
	if nodes, err := p.Create(ctx, cloud.Request{Count: 0}); err != nil || len(nodes) != 0 {
		t.Fatalf("create 0: %v, %v", nodes, err)
	}
	before := time.Now()
	nodes, err := p.Create(ctx, cloud.Request{Count: 2})
	after := time.Now()
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
func listIsWhatIsHeld(t *testing.T, h Harness) {
	p, _ := h.open(t)
	ctx := context.Background()
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
func deleteReleases(t *testing.T, h Harness) {
	p, _ := h.open(t)
	ctx := context.Background()
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
func reopenFindsHeld(t *testing.T, h Harness) {
	p, reopen := h.open(t)
	if reopen == nil {
		t.Skip("this provider keeps no state")
	}
	ctx := context.Background()
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

// A Create whose context is cancelled, before it or half way, returns an error that says so
// with the nodes that did come up, and holds nothing else: the caller can release all of it.
func createCancelled(t *testing.T, h Harness) {
	for _, c := range []struct {
		name  string
		after time.Duration
	}{{"before", 0}, {"during", h.CancelAfter}} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "during" && c.after == 0 {
				t.Skip("the harness sets no CancelAfter")
			}
			p, _ := h.open(t)
			ctx, cancel := context.WithCancel(context.Background())
			if c.after == 0 {
				cancel()
			} else {
				time.AfterFunc(c.after, cancel)
			}
			nodes, err := p.Create(ctx, cloud.Request{Count: 2})
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("create with a cancelled context: %v, %v; want an error wrapping context.Canceled", nodes, err)
			}
			t.Logf("the cancelled Create returned %d node(s) with %v", len(nodes), err)
			got, returned := held(t, p), ids(nodes)
			slices.Sort(returned)
			if !slices.Equal(got, returned) {
				t.Fatalf("the provider holds %v, the cancelled Create returned %v: they must be the same", got, returned)
			}
			if err := p.Delete(context.Background(), returned); err != nil {
				t.Fatal(err)
			}
			if got := held(t, p); len(got) != 0 {
				t.Fatalf("after releasing what came up the provider holds %v", got)
			}
		})
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
func nodesCarryTheirOffer(t *testing.T, h Harness) {
	p, _ := h.open(t)
	ctx := context.Background()
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
