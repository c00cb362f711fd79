package executor

import (
	"context"
	"fmt"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/placement"
)

// How the executor learns of a node going away: it polls Provider.List when a gang fails (heal)
// and when a driver takes over a run (reconcile). A lost node fails its gangs first, so nothing
// is missed between polls.

// reconcile makes the nodes the journal says are held agree with what the provider holds:
// nodes the provider lost are forgotten, nodes it holds that no bracket knows are released.
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
	lost := make([][]string, len(x.st.nodes))
	for b, nodes := range x.st.nodes {
		for _, n := range nodes {
			if have[n.ID] {
				known[n.ID] = true
			} else {
				lost[b] = append(lost[b], n.ID)
			}
		}
	}
	x.mu.Unlock()
	for b, ids := range lost {
		if len(ids) > 0 {
			fmt.Fprintf(x.log, "resume: the provider no longer holds %v\n", ids)
			if err := x.record(Event{Ev: EvNodeOff, Bracket: b, Nodes: ids, Error: "lost"}, true); err != nil {
				return err
			}
		}
	}
	var orphans []string
	for _, n := range held {
		if !known[n.ID] {
			orphans = append(orphans, n.ID)
		}
	}
	if len(orphans) > 0 {
		fmt.Fprintf(x.log, "resume: releasing nodes no bracket knows: %v\n", orphans)
		at := x.cfg.Now()
		if err := x.cfg.Provider.Delete(ctx, orphans); err != nil {
			return fmt.Errorf("run: release orphans: %w", err)
		}
		// A driver that died between renting a node and journaling it still paid for it: bill
		// the orphan's time, to the first bracket (the journal does not say whose it was).
		for _, n := range held {
			if !known[n.ID] {
				if n.RunningAt.IsZero() { // listed while pending: it never billed
					n.RunningAt = at
				}
				if err := x.record(Event{Ev: EvNodeUp, At: n.RunningAt, Node: &n, Error: "orphan: rented by a driver that died before journaling it"}, false); err != nil {
					return err
				}
				if err := x.record(Event{Ev: EvNodeOff, At: at, Nodes: []string{n.ID}, Error: "orphan released"}, true); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// heal forgets bracket b's nodes the provider no longer holds and rents replacements up to want.
// It reports whether the bracket's nodes changed.
func (x *run) heal(ctx context.Context, b, want int) (bool, error) {
	held, err := x.cfg.Provider.List(ctx)
	if err != nil {
		return false, fmt.Errorf("run: list nodes: %w", err)
	}
	alive := map[string]bool{}
	for _, n := range held {
		alive[n.ID] = true
	}
	x.mu.Lock()
	var lost []string
	for _, n := range x.st.nodes[b] {
		if !alive[n.ID] {
			lost = append(lost, n.ID)
		}
	}
	x.mu.Unlock()
	if len(lost) == 0 {
		return false, nil
	}
	fmt.Fprintf(x.log, "nodes lost: %v; replacing them\n", lost)
	if err := x.record(Event{Ev: EvNodeOff, Bracket: b, Nodes: lost, Error: "lost"}, true); err != nil {
		return true, err
	}
	if err := x.cfg.Provider.Delete(ctx, lost); err != nil { // what is left of them stops billing
		fmt.Fprintf(x.log, "release lost nodes %v: %v\n", lost, err)
	}
	_, err = x.scaleTo(ctx, b, want, nil)
	return true, err
}

// scaleTo brings bracket b to n nodes: the least used nodes under the last placement are released
// first (bin-packing before scale-down); new ones are created in one request.
func (x *run) scaleTo(ctx context.Context, b, n int, last placement.Placement) (placement.Placement, error) {
	x.mu.Lock()
	held := append([]cloud.Node(nil), x.st.nodes[b]...)
	x.mu.Unlock()
	if len(held) > n {
		release := placement.Release(toPlacementNodes(held), n, last)
		at := x.cfg.Now() // billing stops when the release is asked for, not when the node is gone
		if err := x.cfg.Provider.Delete(ctx, release); err != nil {
			return last, fmt.Errorf("run: release nodes: %w", err)
		}
		if err := x.record(Event{Ev: EvNodeOff, At: at, Bracket: b, Nodes: release}, true); err != nil {
			return last, err
		}
		gone := map[string]bool{}
		for _, id := range release {
			gone[id] = true
		}
		for t, slots := range last {
			for _, s := range slots {
				if gone[s.Node] {
					delete(last, t)
				}
			}
		}
	}
	if len(held) < n {
		c := x.cfg.Experiment.Cluster
		created, err := x.cfg.Provider.Create(ctx, cloud.Request{Count: n - len(held), InstanceType: c.InstanceType, Market: cloud.Market(c.Market)})
		for i := range created {
			if jerr := x.record(Event{Ev: EvNodeUp, At: created[i].RunningAt, Bracket: b, Node: &created[i]}, true); jerr != nil {
				// The journal cannot hold them: release them rather than leave them billing.
				var ids []string
				for _, c := range created[i:] {
					ids = append(ids, c.ID)
				}
				x.cfg.Provider.Delete(context.WithoutCancel(ctx), ids)
				return last, jerr
			}
		}
		if err != nil {
			return last, fmt.Errorf("run: create nodes: %w", err)
		}
	}
	return last, nil
}

// releaseAll releases every node the run holds, and every node the provider holds for it that
// the journal does not know, then journals the release. The release comes first: a journal
// that cannot be written (a full disk) must not keep nodes billing; that is printed, and a
// resumed driver's reconcile finds them gone.
func (x *run) releaseAll(ctx context.Context, why string) error {
	x.mu.Lock()
	held := make([][]string, len(x.st.nodes))
	known := map[string]bool{}
	for b, nodes := range x.st.nodes {
		for _, n := range nodes {
			held[b] = append(held[b], n.ID)
			known[n.ID] = true
		}
	}
	x.mu.Unlock()
	var ids []string
	for _, h := range held {
		ids = append(ids, h...)
	}
	if listed, err := x.cfg.Provider.List(ctx); err == nil {
		for _, n := range listed {
			if !known[n.ID] {
				ids = append(ids, n.ID)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	at := x.cfg.Now()
	if err := x.cfg.Provider.Delete(ctx, ids); err != nil {
		return fmt.Errorf("release nodes %v: %w", ids, err)
	}
	fmt.Fprintf(x.log, "released %d node(s): %v\n", len(ids), ids)
	for b, h := range held {
		if len(h) == 0 {
			continue
		}
		if err := x.record(Event{Ev: EvNodeOff, At: at, Bracket: b, Nodes: h, Error: why}, true); err != nil {
			fmt.Fprintf(x.log, "released nodes %v but could not journal it: %v\n", h, err)
			return err
		}
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
