package process

import (
	"fmt"
	"syscall"

	"github.com/rubberband-hpo/rubberband/executor/gang"
)

// InterruptNode acts out a node being taken away (the local provider's emulated spot
// interruptions): every gang with a worker on it is stopped as by Stop, so that its checkpoint is
// saved, and its Wait returns an *gang.InterruptedError naming the node; later launches on
// the node fail as unplaceable, as on a node that is gone.
func (r *Runtime) InterruptNode(node, reason string) {
	r.liveMu.Lock()
	if r.gone == nil {
		r.gone = map[string]string{}
	}
	r.gone[node] = reason
	var hit []*handle
	for h, nodes := range r.live {
		for _, n := range nodes {
			if n == node {
				hit = append(hit, h)
				break
			}
		}
	}
	r.liveMu.Unlock()
	for _, h := range hit {
		h.mu.Lock()
		h.stopped = true
		h.interrupted = &gang.InterruptedError{Node: node, Reason: reason}
		h.mu.Unlock()
		fmt.Fprintf(h.log, "rubberband: %s: stopping the gang (its checkpoint is saved)\n", reason)
		h.signal(syscall.SIGTERM)
	}
}

// placeable refuses a gang with a worker on a node InterruptNode took away: the node's loss, not
// the gang's failure (an *gang.InterruptedError, so that the driver replaces the node and
// does not count the try against the trial). A node taken away while idle is learnt of so.
func (r *Runtime) placeable(g gang.Gang) error {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	for _, w := range g.Workers {
		if why, gone := r.gone[w.Node.ID]; gone {
			return fmt.Errorf("%w: node %s is gone (interrupted): %w", gang.ErrUnplaceable, w.Node.ID,
				&gang.InterruptedError{Node: w.Node.ID, Reason: why})
		}
	}
	return nil
}

// track keeps a started gang among the live ones, by the nodes of its workers, until it ends
// (conclude untracks it after closing exited; one that has ended already is not tracked).
func (r *Runtime) track(h *handle, g gang.Gang) {
	nodes := make([]string, len(g.Workers))
	for i, w := range g.Workers {
		nodes[i] = w.Node.ID
	}
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	select {
	case <-h.exited:
		return
	default:
	}
	if r.live == nil {
		r.live = map[*handle][]string{}
	}
	r.live[h] = nodes
}

func (r *Runtime) untrack(h *handle) {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	delete(r.live, h)
}
