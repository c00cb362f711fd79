// Package fake holds in-memory fakes of the executor's own interfaces, cloud.Provider and
// gang.Runtime, for unit tests of the control loop: they record every call and inject the
// faults a test asks for (a partial Create, a lost node, a gang that fails N times, hangs or
// exits short of its target, a Delete that errs). They stand beside the real backends' tests,
// never instead of them.
package fake

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/gang"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Provider rents nodes that exist only in memory.
type Provider struct {
	// Clock is its time (default the wall clock).
	Clock       clock.Clock
	GPUsPerNode int
	// Offer is what it rents (a request for another type or market is a *cloud.CapacityError).
	Offer cloud.Offer
	// More are other offers it rents besides Offer (the same type on the other market, for a
	// hedged stage); a request takes the first offer that matches it.
	More []cloud.Offer
	// CreateFault, when set, is asked at each Create call (numbered from 1) how many of the n
	// nodes come up and with what error for the rest.
	CreateFault func(call, n int) (up int, err error)
	// DeleteFault, when set, is the error of each Delete call (numbered from 1).
	DeleteFault func(call int, ids []string) error

	mu      sync.Mutex
	next    int
	nodes   map[string]cloud.Node
	tokens  map[string]string // request token and node index -> the node rented under it
	creates int
	deletes int
	// Created and Deleted record every node ever created and every delete asked for, in order.
	Created []string
	Deleted []string
}

var _ cloud.Provider = (*Provider)(nil)

// Create rents n nodes, or fewer when CreateFault says so. Like EC2's client tokens, a request
// under a token seen before hands back the nodes rented under it that are still held.
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	offer, err := p.offerFor(req)
	if err != nil {
		return nil, err
	}
	n := req.Count
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes == nil {
		p.nodes = map[string]cloud.Node{}
	}
	p.creates++
	up := n
	if p.CreateFault != nil {
		up, err = p.CreateFault(p.creates, n)
	}
	if p.tokens == nil {
		p.tokens = map[string]string{}
	}
	var out []cloud.Node
	for i := range min(up, n) {
		key := fmt.Sprintf("%s/%d", req.Token, i)
		if id, seen := p.tokens[key]; seen && req.Token != "" {
			if node, held := p.nodes[id]; held {
				if node.RunningAt.IsZero() { // it finished starting while the caller was away
					node.RunningAt = clock.Or(p.Clock).Now()
					p.nodes[id] = node
				}
				out = append(out, node)
				continue
			}
		}
		p.next++
		node := offer.Stamp(cloud.Node{ID: fmt.Sprintf("n%03d", p.next), GPUs: p.GPUsPerNode, Addr: "127.0.0.1", RunningAt: clock.Or(p.Clock).Now(), Token: req.Token})
		p.nodes[node.ID] = node
		p.tokens[key] = node.ID
		p.Created = append(p.Created, node.ID)
		out = append(out, node)
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return out, err
}

// offerFor is the first of Offer and More that req asks for.
func (p *Provider) offerFor(req cloud.Request) (cloud.Offer, error) {
	err := p.Offer.Check(req)
	if err == nil {
		return p.Offer, nil
	}
	for _, o := range p.More {
		if o.Check(req) == nil {
			return o, nil
		}
	}
	return cloud.Offer{}, err
}

// Delete releases nodes; unknown ones are not an error.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deletes++
	if p.DeleteFault != nil {
		if err := p.DeleteFault(p.deletes, ids); err != nil {
			return err
		}
	}
	for _, id := range ids {
		delete(p.nodes, id)
		p.Deleted = append(p.Deleted, id)
	}
	return nil
}

// List returns the nodes held, by ID.
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloud.Node, 0, len(p.nodes))
	for _, n := range p.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Adopt makes the provider hold nodes rented before it existed (by an earlier driver's
// provider), as a cloud account would.
func (p *Provider) Adopt(nodes ...cloud.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes == nil {
		p.nodes = map[string]cloud.Node{}
	}
	for _, n := range nodes {
		p.nodes[n.ID] = n
		var seq int
		if _, err := fmt.Sscanf(n.ID, "n%d", &seq); err == nil {
			p.next = max(p.next, seq)
		}
	}
}

// Lose makes a node vanish, as a crashed machine or a spot interruption would.
func (p *Provider) Lose(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.nodes, id)
}

// Pending makes held nodes look still starting (RunningAt zero), as EC2 lists a pending instance.
func (p *Provider) Pending(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if n, ok := p.nodes[id]; ok {
			n.RunningAt = time.Time{}
			p.nodes[id] = n
		}
	}
}

// Held is how many nodes are held now.
func (p *Provider) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.nodes)
}

// Behavior is what one launch of a gang does.
type Behavior struct {
	// Reports are printed in order; nil means one report at the target with Metric's value.
	Reports []trial.Report
	// Err is what Wait returns once the reports are out (the checkpoint is not saved then).
	Err error
	// Hang keeps the gang running after its reports until it is stopped.
	Hang bool
	// Duration is how long the gang runs before its reports.
	Duration time.Duration
	// Every, when set, spaces the reports: one every Every after Duration.
	Every time.Duration
	// Count makes Reports one per iteration, from the trial's checkpoint to the target: a
	// trainer that trains (and, stopped, keeps what it reached).
	Count bool
}

// Runtime launches gangs in memory and keeps each trial's checkpoint as its last report, so that
// it honours the runtime contract: a relaunch at the target re-reports instead of training.
type Runtime struct {
	// Clock is its time (default the wall clock): gangs run as its actors.
	Clock clock.Clock
	// Behave, when set, says what launch number n (from 1, per trial) of g does.
	Behave func(g gang.Gang, n int) Behavior
	// LaunchFault, when set, fails launch number n (per trial) before anything starts.
	LaunchFault func(g gang.Gang, n int) error

	mu       sync.Mutex
	kept     map[string]trial.Report
	tries    map[string]int
	live     map[*handle]bool
	noticed  map[string]string // nodes given their notice, and why: they take no gang
	launched int
	Launches []gang.Gang
	running  int
	peak     int
}

// InterruptNode gives node its notice: the gangs with a worker on it are stopped, keep what
// they reached, and end with an *gang.InterruptedError naming it; a gang launched there
// later is refused with one.
func (r *Runtime) InterruptNode(node, why string) {
	r.mu.Lock()
	if r.noticed == nil {
		r.noticed = map[string]string{}
	}
	r.noticed[node] = why
	var hit []*handle
	for h := range r.live {
		if slices.Contains(h.nodes, node) && h.interrupted == nil {
			h.interrupted = &gang.InterruptedError{Node: node, Reason: why}
			hit = append(hit, h)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(hit, func(a, b *handle) int { return a.seq - b.seq }) // in launch order: deterministic under a Sim
	for _, h := range hit {
		h.Stop()
	}
}

var _ gang.Runtime = (*Runtime)(nil)

// Metric is the deterministic objective value a trial reports at an iteration by default.
func Metric(trialID string, iter int) float64 {
	h := fnv.New32a()
	h.Write([]byte(trialID))
	return float64(h.Sum32()%1000)/1000*0.5 + 0.5 - 0.4/float64(iter+1)
}

// Launch starts a gang.
func (r *Runtime) Launch(ctx context.Context, g gang.Gang) (gang.Handle, error) {
	r.mu.Lock()
	if r.kept == nil {
		r.kept, r.tries = map[string]trial.Report{}, map[string]int{}
	}
	for _, w := range g.Workers {
		if why, ok := r.noticed[w.Node.ID]; ok {
			r.mu.Unlock()
			return nil, fmt.Errorf("%w: node %s is going: %w", gang.ErrUnplaceable, w.Node.ID, &gang.InterruptedError{Node: w.Node.ID, Reason: why})
		}
	}
	r.tries[g.Trial]++
	n := r.tries[g.Trial]
	r.Launches = append(r.Launches, g)
	kept, haveKept := r.kept[g.Trial]
	r.mu.Unlock()
	if r.LaunchFault != nil {
		if err := r.LaunchFault(g, n); err != nil {
			return nil, err
		}
	}
	target := g.Workers[0].Env.TargetIter
	if haveKept && kept.Iter >= target {
		return gang.Reported(kept), nil
	}
	b := Behavior{}
	if r.Behave != nil {
		b = r.Behave(g, n)
	}
	if b.Count {
		b.Reports = nil
		for it := kept.Iter + 1; it <= target; it++ {
			b.Reports = append(b.Reports, trial.Report{Iter: it, Metrics: map[string]float64{"score": Metric(g.Trial, it)}})
		}
	}
	if b.Reports == nil && b.Err == nil {
		b.Reports = []trial.Report{{Iter: target, Metrics: map[string]float64{"score": Metric(g.Trial, target)}}}
	}
	clk := clock.Or(r.Clock)
	h := &handle{clk: clk, reports: make(chan trial.Report, len(b.Reports)+1), exited: make(chan struct{})}
	h.stopped, h.stop = clock.WithCancel(clk, context.Background())
	for _, w := range g.Workers {
		h.nodes = append(h.nodes, w.Node.ID)
	}
	r.mu.Lock()
	r.running++
	r.peak = max(r.peak, r.running)
	if r.live == nil {
		r.live = map[*handle]bool{}
	}
	r.launched++
	h.seq = r.launched
	r.live[h] = true
	r.mu.Unlock()
	clk.Go("fake gang "+g.Trial, func() {
		stopped := clk.Sleep(h.stopped, b.Duration) != nil
		var last *trial.Report
		for i := 0; !stopped && i < len(b.Reports); i++ {
			if i > 0 && b.Every > 0 && clk.Sleep(h.stopped, b.Every) != nil {
				stopped = true
				break
			}
			rep := b.Reports[i]
			rep.At = clk.Now()
			h.reports <- rep
			clock.Notify(clk, h.reports)
			last = &rep
		}
		if !stopped && b.Hang {
			clk.Sleep(h.stopped, 1<<62) // until stopped
			stopped = true
		}
		close(h.reports)
		clock.Notify(clk, h.reports)
		r.mu.Lock()
		r.running--
		delete(r.live, h)
		if last != nil && (b.Err == nil || stopped) {
			r.kept[g.Trial] = *last
		}
		interrupted := h.interrupted
		r.mu.Unlock()
		switch {
		case interrupted != nil:
			h.err = interrupted
		case stopped:
			h.err = gang.ErrStopped
		default:
			h.err = b.Err
		}
		close(h.exited)
		clock.Notify(clk, h.exited)
	})
	return h, nil
}

// Keep sets a trial's checkpoint as if a launch had saved it with this last report.
func (r *Runtime) Keep(trialID string, rep trial.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kept == nil {
		r.kept, r.tries = map[string]trial.Report{}, map[string]int{}
	}
	r.kept[trialID] = rep
}

// Tries is how often a trial was launched.
func (r *Runtime) Tries(trialID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries[trialID]
}

// Running is how many gangs run now; Peak the most that ever ran at once.
func (r *Runtime) Running() (now, peak int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running, r.peak
}

type handle struct {
	clk         clock.Clock
	seq         int // launch number
	nodes       []string
	interrupted *gang.InterruptedError // by InterruptNode (under the runtime's lock)
	reports     chan trial.Report
	exited      chan struct{}
	stopped     context.Context // cancelled by Stop
	stop        context.CancelFunc
	err         error
}

func (h *handle) Reports() <-chan trial.Report { return h.reports }
func (h *handle) Exited() <-chan struct{}      { return h.exited }
func (h *handle) Stop()                        { h.stop() }

// Wait returns once the gang ended (under a Sim, from an actor: it blocks through the clock).
func (h *handle) Wait() error {
	clock.Recv(context.Background(), h.clk, h.exited)
	return h.err
}
