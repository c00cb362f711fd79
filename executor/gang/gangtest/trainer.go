package gangtest

import (
	"context"
	"errors"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/trial"
)

// The cases below hold a runtime to the contract with a trainer that only trains (Env.counter):
// every runtime keeps them, whether it runs commands or not.

// launchOn starts g or fails the test.
func (e Env) launchOn(t *testing.T, g gang.Gang) gang.Handle {
	t.Helper()
	h, err := e.Runtime.Launch(context.Background(), g)
	if err != nil {
		t.Fatalf("launch %s: %v", g.Trial, err)
	}
	t.Cleanup(h.Stop)
	return h
}

// next is the gang's next report; false once it has ended.
func (e Env) next(h gang.Handle) (trial.Report, bool) {
	r, ok, _ := clock.Recv(context.Background(), e.clock(), h.Reports())
	return r, ok
}

// A gang trains to its target: rank 0's reports come one per iteration, in order, timed; Wait
// says nil. Launched again at the target, it trains nothing and delivers the kept report again,
// its time included.
func trainsToTheTarget(t *testing.T, e Env) {
	reps, err := drainOn(t, e.clock(), e.launchOn(t, e.counter("rt-count", 2, 0, 3)))
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if got := iters(reps); !sameInts(got, []int{1, 2, 3}) {
		t.Fatalf("iterations reported %v, want [1 2 3]", got)
	}
	for i, r := range reps {
		if r.At.IsZero() || (i > 0 && r.At.Before(reps[i-1].At)) {
			t.Errorf("report %d at %v: reports are timed, in order", i, r.At)
		}
	}
	again, err := drainOn(t, e.clock(), e.launchOn(t, e.counter("rt-count", 2, 0, 3)))
	if err != nil || len(again) != 1 || again[0].Iter != 3 || !again[0].At.Equal(reps[2].At) {
		t.Fatalf("relaunch at the target: %+v, %v; want the kept report of iteration 3 again", again, err)
	}
}

// A stopped gang ends with ErrStopped and keeps what it reached: its relaunch trains on from
// there, not from the start.
func stopKeepsWhatItReached(t *testing.T, e Env) {
	h := e.launchOn(t, e.counter("rt-stop-keep", 1, 0, 1000))
	var reached int
	for range 2 {
		r, ok := e.next(h)
		if !ok {
			t.Fatalf("the gang ended before two reports: %v", h.Wait())
		}
		reached = r.Iter
	}
	h.Stop()
	rest, err := drainOn(t, e.clock(), h)
	if !errors.Is(err, gang.ErrStopped) {
		t.Fatalf("wait after stop: %v, want ErrStopped", err)
	}
	if len(rest) > 0 {
		reached = rest[len(rest)-1].Iter
	}
	g := e.launchOn(t, e.counter("rt-stop-keep", 1, 0, reached+2))
	r, ok := e.next(g)
	if !ok || r.Iter != reached+1 {
		t.Fatalf("the relaunch first reported %+v (ok %v), want iteration %d: it goes on from what the stopped gang reached", r, ok, reached+1)
	}
	drainOn(t, e.clock(), g)
}

// A node's interruption notice stops the gangs on it, at once or when the node goes (a runtime
// whose provider passes the notice on lets them train through it), and they keep what they
// reached; their Wait names the node (*gang.InterruptedError); a gang launched there after the
// notice trains nothing (refused for the notice, or as the node is gone); a relaunch elsewhere
// goes on from there.
func interruptedNamesTheNode(t *testing.T, e Env) {
	if e.Interrupt == nil {
		t.Skip("this runtime's Env cannot give a node a notice")
	}
	node := e.Nodes[0].ID
	h := e.launchOn(t, e.counter("rt-notice", 1, 0, 1000))
	r, ok := e.next(h)
	if !ok {
		t.Fatalf("the gang ended before its first report: %v", h.Wait())
	}
	e.Interrupt(node, "spot interruption notice (gangtest)")
	rest, err := drainOn(t, e.clock(), h)
	var in *gang.InterruptedError
	if !errors.As(err, &in) || in.Node != node {
		t.Fatalf("wait after the notice: %v, want an *gang.InterruptedError naming %s", err, node)
	}
	if len(rest) > 0 {
		r = rest[len(rest)-1]
	}
	// A gang launched on the node after its notice trains nothing there: refused, or stopped as
	// it starts, for the node's loss.
	late := e.counter("rt-notice", 1, 0, r.Iter+1000)
	if h, err := e.Runtime.Launch(context.Background(), late); err == nil {
		t.Cleanup(h.Stop)
		reports, werr := drainOn(t, e.clock(), h)
		if !errors.As(werr, &in) || in.Node != node || len(reports) > 0 {
			t.Fatalf("a gang launched on %s after its notice: %d report(s), wait %v; want none and an *gang.InterruptedError naming it", node, len(reports), werr)
		}
	} else if (!errors.As(err, &in) || in.Node != node) && !errors.Is(err, gang.ErrUnplaceable) {
		t.Fatalf("a gang launched on %s after its notice: %v, want an *gang.InterruptedError naming it, or ErrUnplaceable for a node gone", node, err)
	}
	if len(e.Nodes) < 2 {
		return
	}
	g := e.counter("rt-notice", 1, 0, r.Iter+1)
	for i := range g.Workers {
		g.Workers[i].Node = e.Nodes[len(e.Nodes)-1]
	}
	again, err := drainOn(t, e.clock(), e.launchOn(t, g))
	if err != nil || len(again) != 1 || again[0].Iter != r.Iter+1 {
		t.Fatalf("the relaunch on %s: %+v, %v; want one report, iteration %d", e.Nodes[len(e.Nodes)-1].ID, again, err, r.Iter+1)
	}
}

// A gang with a worker on a node the runtime cannot place it on fails in Launch with an error
// wrapping gang.ErrUnplaceable, and trains nothing.
func unplaceableNode(t *testing.T, e Env) {
	if e.Unplaceable == "" {
		t.Skip("this runtime never finds a gang unplaceable")
	}
	g := e.counter("rt-nowhere", 2, 0, 2)
	g.Workers[1].Node.ID = e.Unplaceable
	h, err := e.Runtime.Launch(context.Background(), g)
	if err == nil {
		h.Stop()
		drainOn(t, e.clock(), h)
		t.Fatal("launch of an unplaceable gang succeeded")
	}
	if !errors.Is(err, gang.ErrUnplaceable) {
		t.Fatalf("launch: %v, want an error wrapping gang.ErrUnplaceable", err)
	}
	reps, err := drainOn(t, e.clock(), e.launchOn(t, e.counter("rt-nowhere", 1, 0, 1)))
	if err != nil || len(reps) != 1 || reps[0].Iter != 1 {
		t.Fatalf("after the refusal the trial trained %+v, %v: want it from the start", reps, err)
	}
}
