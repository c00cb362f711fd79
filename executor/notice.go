package executor

import (
	"context"
	"fmt"
	"slices"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Noticer is implemented by providers that hear of a node's interruption before it goes (a spot
// instance's notice) and pass it on, so that the run trains through it (sim.Spot.Notice): the
// replacement is asked for at the notice, and the node's gangs train on until it is up.
//
// Error contract: NextNotice blocks until a node of the provider's gets its notice, and returns
// it, or until ctx ends (ctx's error). A node gets one notice. A provider that passes notices on
// still ends the node's gangs, their checkpoints saved, when the node goes (the gang's Wait
// returns a *gang.InterruptedError), and the node is no longer listed from then on: a driver
// that missed the notice learns of the loss as without one.
type Noticer interface {
	NextNotice(ctx context.Context) (cloud.Notice, error)
}

// listenForNotices passes the provider's notices, when it gives them, to the stage loop of the
// bracket that holds the node, until the function it returns is called.
func (x *run) listenForNotices(ctx context.Context) (stop func()) {
	src, ok := x.cfg.Provider.(Noticer)
	if !ok {
		return func() {}
	}
	lctx, cancel := clock.WithCancel(x.clk, ctx)
	x.clk.Go("notices", func() {
		for {
			n, err := src.NextNotice(lctx)
			if err != nil {
				return
			}
			x.notice(n)
		}
	})
	return cancel
}

// notice hands notice n to the stage loop of the bracket holding its node. With none running
// (between stages) it is only said: the node's loss is found as without a notice, at the next
// launch there or when the provider no longer lists it.
func (x *run) notice(n cloud.Notice) {
	x.mu.Lock()
	var to *clock.Queue[stageEvent]
	for b, nodes := range x.st.Nodes {
		if slices.ContainsFunc(nodes, func(c cloud.Node) bool { return c.ID == n.Node }) {
			to = x.stages[b]
		}
	}
	x.mu.Unlock()
	if to == nil {
		fmt.Fprintf(x.log, "%s: no stage uses it now; its loss is found at its next launch\n", n.Reason)
		return
	}
	to.Put(stageEvent{kind: evNotice, node: n.Node, why: n.Reason})
}
