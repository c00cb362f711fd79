package virtual

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
	"github.com/rubberband-hpo/rubberband/trial/builtin/synthetic"
)

// Runtime is one driver's view of the world's trainers: it launches gangs that train as the
// synthetic trainer does, in virtual time.
type Runtime struct {
	w     *World
	epoch int
}

var (
	_ gang.Runtime = (*Runtime)(nil)
	_ gang.Reaper  = (*Runtime)(nil)
)

// worldGang is one launch of a trial, running in the world.
type worldGang struct {
	id       int
	epoch    int // the driver that launched it
	trial    string
	nodes    []*node
	gpus     [][2]int // node index in nodes, GPU
	from     int      // the checkpoint's iteration it started from
	iter     int      // iterations done
	target   int
	reports  func(iter int) map[string]float64 // the synthetic trainer's reports
	offer    *sim.Offer
	world    int // GPUs
	slowdown float64
	draws    func() float64 // the next iteration's latency, seconds
	last     *trial.Report
	crashAt  int // an injected trainer crash at this iteration (0: none)
	hangAt   int // an injected hang at this iteration (0: none)
	next     clock.Timer
	h        *handle // nil once its driver is gone
}

// interrupted is a gang's end when its node got a spot notice.
type interrupted struct{ node, why string }

func (i *interrupted) Error() string { return i.why }

// Launch starts a gang on the nodes its workers name, from the trial's checkpoint: its start-up,
// then one iteration after another, each a fresh draw of the model's latency at the gang's GPU
// count (times its slowest node's slowdown), each reported with the synthetic learning curve. A
// checkpoint at the target already is re-reported, nothing trained.
func (r *Runtime) Launch(ctx context.Context, g gang.Gang) (gang.Handle, error) {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.severed[r.epoch] {
		return nil, ErrSevered
	}
	if len(g.Workers) == 0 {
		return nil, fmt.Errorf("launch %s: the gang has no workers", g.Trial)
	}
	if n := w.gangsOf[gangKey{g.Trial, r.epoch}]; n > 0 {
		w.breach("trial %s launched while %d gangs of it still run", g.Trial, n)
	}
	env := g.Workers[0].Env
	// A trial keeps the configuration it was first launched with: a checkpoint resumed under
	// another would be another model, its result silently changed.
	key, _ := json.Marshal(env.Params)
	if first, ok := w.params[g.Trial]; !ok {
		w.params[g.Trial] = string(key)
	} else if first != string(key) {
		w.breach("trial %s launched with %s, first with %s", g.Trial, key, first)
	}
	gg := &worldGang{epoch: r.epoch, trial: g.Trial, target: env.TargetIter, world: len(g.Workers), slowdown: 1}
	gg.reports = synthetic.Reports(w.exp, w.bench, w.exp.Objective.Metric, env.Params)
	seen := map[string]int{}
	for _, wk := range g.Workers {
		n, held := w.nodes[wk.Node.ID]
		if !held || n.RunningAt.IsZero() {
			return nil, fmt.Errorf("launch %s: %w: node %s is not held", g.Trial, gang.ErrUnplaceable, wk.Node.ID)
		}
		gpu := 0
		if len(wk.Env.GPUs) > 0 {
			gpu = wk.Env.GPUs[0]
		}
		if gpu < 0 || gpu >= len(n.gpus) {
			return nil, fmt.Errorf("launch %s: %w: node %s has no GPU %d", g.Trial, gang.ErrUnplaceable, n.ID, gpu)
		}
		if other := n.gpus[gpu]; other != 0 {
			w.breach("trial %s given GPU %d of node %s, which gang %d (trial %s) holds", g.Trial, gpu, n.ID, other, w.gangs[other].trial)
			return nil, fmt.Errorf("launch %s: %w: GPU %d of node %s is busy", g.Trial, gang.ErrUnplaceable, gpu, n.ID)
		}
		i, ok := seen[n.ID]
		if !ok {
			i = len(gg.nodes)
			seen[n.ID] = i
			gg.nodes = append(gg.nodes, n)
			gg.slowdown = max(gg.slowdown, n.Slowdown)
		}
		gg.gpus = append(gg.gpus, [2]int{i, gpu})
	}
	if kept, ok := w.kept[g.Trial]; ok {
		if kept.Iter >= gg.target {
			return gang.Reported(kept), nil
		}
		gg.from = kept.Iter
	}
	gg.iter = gg.from
	w.launches++
	if f := w.faults; f != nil {
		if err := f.launch(w, gg); err != nil {
			return nil, err
		}
	}
	w.tries[g.Trial]++
	rng := w.rng("launch", g.Trial, w.tries[g.Trial])
	gg.offer = gg.nodes[0].offer
	it := gg.offer.IterLatency(gg.world)
	slow := synthetic.Options{NodeSlowdown: gg.slowdown, Slowdown: w.slowdown, SlowdownFromIter: w.slowFrom}
	own := synthetic.IterTime(w.bench, env.Params)
	gg.draws = func() float64 { return it.Sample(rng) * own * slow.LatencyFactor(gg.iter+1) }
	startup := gg.offer.LaunchSample(rng)*gg.slowdown + w.firstStageLag(gg, env.StartIter) + gg.offer.Contention.At(gg.world)*float64(w.burst.Place(w.clk.Now()))
	w.nextGang++
	gg.id = w.nextGang
	for _, at := range gg.gpus {
		gg.nodes[at[0]].gpus[at[1]] = gg.id
	}
	gg.h = &handle{w: w, reports: make(chan trial.Report, gg.target-gg.from+1), exited: make(chan struct{})}
	gg.h.g = gg
	w.gangs[gg.id] = gg
	w.gangsOf[gangKey{gg.trial, gg.epoch}]++
	for _, n := range gg.nodes {
		if n.notice != "" {
			// Its workers see the node's notice as they start (the metadata the node agent
			// watches): the gang is stopped at once, nothing trained, as on a node it ran on.
			gg.next = w.clk.AfterFunc(0, func() {
				w.mu.Lock()
				defer w.mu.Unlock()
				w.end(gg, &interrupted{node: n.ID, why: n.notice}, w.exp.Cluster.Spot.OnNotice != spec.OnNoticeRestart)
			})
			return gg.h, nil
		}
	}
	w.schedule(gg, startup+gg.draws()) // start-up, then the first iteration
	return gg.h, nil
}

// firstStageLag is how late gang g, launched from iteration from, gets going: the first-stage lag
// (drawn once per world, on the first gang's offer) when it is of the job's first wave, trials
// starting from scratch before any gang has ended, else 0; w.mu is held. The simulator draws a
// lag per bracket: the two agree for a job of one bracket, or of brackets with one lag.
func (w *World) firstStageLag(g *worldGang, from int) float64 {
	if w.waveEnded || from != 0 || g.offer.FirstLag.Mean() <= 0 {
		return 0
	}
	if w.lag == nil {
		lag := g.offer.FirstLag.Sample(w.rng("first-stage-lag"))
		w.lag = &lag
	}
	return *w.lag
}

// schedule sets the gang's next iteration to end in seconds; w.mu is held.
func (w *World) schedule(g *worldGang, seconds float64) {
	g.next = w.clk.AfterFunc(time.Duration(seconds*float64(time.Second)), func() { w.iterate(g) })
}

// iterate ends one iteration of gang g: it reports, and trains on, or ends at its target.
func (w *World) iterate(g *worldGang) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gangs[g.id] != g {
		return // it ended meanwhile
	}
	next := g.iter + 1
	if next == g.hangAt {
		w.trigger("trial %s hangs at iteration %d", g.trial, next)
		g.next = nil // until stopped
		return
	}
	if next == g.crashAt {
		w.trigger("trial %s's trainer crashes at iteration %d", g.trial, next)
		w.end(g, fmt.Errorf("exit status 137: the trainer crashed at iteration %d (injected)", next), false)
		return
	}
	g.iter = next
	rep := trial.Report{Iter: g.iter, Metrics: g.reports(g.iter), At: w.clk.Now()}
	g.last = &rep
	if g.h != nil {
		g.h.reports <- rep
		clock.Notify(w.clk, g.h.reports)
	}
	if g.iter >= g.target {
		w.trained[fmt.Sprintf("%s@%d", g.trial, g.target)]++
		w.end(g, nil, true)
		return
	}
	w.schedule(g, g.draws())
}

// end ends gang g with err (nil: it reached its target), saving its checkpoint when save; w.mu
// is held.
func (w *World) end(g *worldGang, err error, save bool) {
	if w.gangs[g.id] != g {
		return
	}
	delete(w.gangs, g.id)
	if k := (gangKey{g.trial, g.epoch}); w.gangsOf[k] > 1 {
		w.gangsOf[k]--
	} else {
		delete(w.gangsOf, k)
	}
	w.waveEnded = true
	if g.next != nil {
		g.next.Stop()
	}
	for _, at := range g.gpus {
		if n := g.nodes[at[0]]; n.gpus[at[1]] == g.id {
			n.gpus[at[1]] = 0
		}
	}
	if save && g.last != nil {
		w.kept[g.trial] = *g.last
	}
	if g.h != nil {
		var in *interrupted
		if errors.As(err, &in) {
			err = &gang.InterruptedError{Node: in.node, Reason: in.why}
		}
		g.h.end(err)
		g.h = nil
	}
}

// Reap ends the gangs of every earlier driver, unsaved, as the process runtime kills a dead
// driver's workers.
func (r *Runtime) Reap(ctx context.Context) error {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.severed[r.epoch] {
		return ErrSevered
	}
	for _, id := range w.gangIDs() {
		if g := w.gangs[id]; g.epoch != r.epoch {
			w.end(g, errors.New("killed: its driver is gone"), false)
		}
	}
	return nil
}

// gangKey is a trial's gangs launched by one driver (epoch).
type gangKey struct {
	trial string
	epoch int
}

// gangIDs are the running gangs, in launch order; w.mu is held.
func (w *World) gangIDs() []int {
	ids := make([]int, 0, len(w.gangs))
	for id := range w.gangs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// gangsOn are the running gangs with a worker on n, in launch order; w.mu is held.
func (w *World) gangsOn(n *node) []int {
	var out []int
	for _, id := range w.gangIDs() {
		for _, m := range w.gangs[id].nodes {
			if m == n {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// handle is a driver's hold on a gang.
type handle struct {
	w       *World
	g       *worldGang
	reports chan trial.Report
	exited  chan struct{}
	err     error
	ended   bool
}

var _ gang.Handle = (*handle)(nil)

func (h *handle) Reports() <-chan trial.Report { return h.reports }
func (h *handle) Exited() <-chan struct{}      { return h.exited }

// Wait returns how the gang ended, once it has; under the world's Sim, from an actor.
func (h *handle) Wait() error {
	clock.Recv(context.Background(), h.w.clk, h.exited)
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.err
}

// Stop stops the gang at once: the iteration under way is lost, the checkpoint of the last one
// done is saved (a trainer's SIGTERM).
func (h *handle) Stop() {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if h.g != nil && h.w.gangs[h.g.id] == h.g {
		h.w.end(h.g, gang.ErrStopped, true)
	}
}

// end closes the handle with err; the world's lock is held.
func (h *handle) end(err error) {
	if h.ended {
		return
	}
	h.ended, h.err = true, err
	close(h.reports)
	clock.Notify(h.w.clk, h.reports)
	close(h.exited)
	clock.Notify(h.w.clk, h.exited)
}
