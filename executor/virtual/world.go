package virtual

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
	"github.com/rubberband-hpo/rubberband/trial/builtin/synthetic"
)

// Epoch is where virtual time starts: a fixed instant, so that a run's journal is a function of
// its spec, seed and faults alone.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// ErrSevered is what a driver's Provider, Runtime and handles answer once the driver was cut
// off from the world (it crashed): nothing it asks for happens any more.
var ErrSevered = errors.New("virtual: this driver is gone (crashed): nothing it asks for happens")

// World is a virtual cloud and its trainers on a clock.Sim. It outlives the drivers that use it.
type World struct {
	clk    *clock.Sim
	exp    *spec.Experiment
	model  *sim.Model
	seed   uint64
	notice time.Duration
	faults *Faults
	// slowdown and slowFrom slow every gang's iterations from slowFrom on, as trainer.env slows
	// the synthetic trainer (RB_SYNTH_SLOWDOWN): a job that falls behind its plan.
	slowdown float64
	slowFrom int
	// bench is the benchmark objective trainer.env names (nil: the hashed curves), shared by
	// every launch.
	bench *objective.Objective

	mu        sync.Mutex
	nodes     map[string]*node // held
	rented    map[string]*node // every node ever rented
	created   int              // how many
	requests  int              // Create calls
	tokens    map[string]*request
	gangs     map[int]*worldGang // running
	gangsOf   map[gangKey]int    // running gangs per trial and driver: a launch checks its own in O(1)
	nextGang  int
	tries     map[string]int // launches per trial, for the draws' streams
	launches  int            // every launch, for the faults
	kept      map[string]trial.Report
	injected  map[string]bool // trial@target: a failure was injected there already
	severed   map[int]bool    // drivers cut off
	spans     []NodeSpan
	trained   map[string]int    // trial@target -> gangs that trained up to it
	params    map[string]string // trial -> its configuration, as first launched (JSON)
	breaches  []string
	triggered []string // faults that fired, in order
	// waveEnded is set once a gang has ended: launches from then on are not the job's first
	// wave, which gets going late by one draw of the first-stage lag (profile.first_stage_lag).
	waveEnded bool
	lag       *float64
	// burst counts the launches at one moment: each queues behind those before it
	// (profile.startup_contention), as the model has it.
	burst sim.Burst[time.Time]
	// notices holds each driver's queue of spot notices (by epoch), once it listens.
	notices map[int]*clock.Queue[cloud.Notice]
}

// node is one rented machine.
type node struct {
	cloud.Node
	index  int // its number, from 1
	offer  *sim.Offer
	gpus   []int // the gang on each GPU (0: free)
	timers []clock.Timer
	gone   bool
	notice string // why the node is going, once its spot notice came; "" before
}

// request is what one Create rented, under its token: the nodes, and when they are ready.
type request struct {
	nodes []string
	ready time.Time
}

// NodeSpan is what the world billed for one node: its price from RunningAt to End (the release,
// or when it was taken away: Why).
type NodeSpan struct {
	Node         string
	PricePerHour float64
	RunningAt    time.Time
	End          time.Time
	Why          string
}

// NewWorld makes a world for the experiment on clock c, drawing from seed (the spec's, for a
// run); faults may be nil.
func NewWorld(c *clock.Sim, exp *spec.Experiment, seed int64, faults *Faults) (*World, error) {
	m, err := sim.NewModel(exp)
	if err != nil {
		return nil, fmt.Errorf("virtual world: %w", err)
	}
	w := &World{clk: c, exp: exp, model: m, seed: uint64(seed), notice: exp.Cluster.Spot.Notice.D(), faults: faults,
		nodes: map[string]*node{}, rented: map[string]*node{}, tokens: map[string]*request{}, gangs: map[int]*worldGang{}, gangsOf: map[gangKey]int{}, tries: map[string]int{},
		kept: map[string]trial.Report{}, injected: map[string]bool{}, severed: map[int]bool{}, trained: map[string]int{},
		params: map[string]string{}, notices: map[int]*clock.Queue[cloud.Notice]{}}
	env := func(k string) string { return exp.Trainer.Env[k] }
	w.slowdown, w.slowFrom = synthetic.SlowdownFrom(env)
	if w.bench, err = synthetic.Objective(env); err != nil {
		return nil, fmt.Errorf("virtual world: %w", err)
	}
	return w, nil
}

// Model is the world's model of the experiment.
func (w *World) Model() *sim.Model { return w.model }

// rng is the stream of draws of one thing (a request, a node, a trial's launch): each thing has
// its own, so that what happens to one never shifts the draws of another.
func (w *World) rng(kind string, parts ...any) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprint(h, kind)
	for _, p := range parts {
		fmt.Fprint(h, "/", p)
	}
	return rand.New(rand.NewPCG(w.seed, h.Sum64()))
}

// Sever cuts driver epoch off: its provider and runtime refuse everything, and its gangs'
// handles end for it (its process is gone), while the gangs go on in the world.
func (w *World) Sever(epoch int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.severed[epoch] = true
	for _, id := range w.gangIDs() {
		if g := w.gangs[id]; g.epoch == epoch && g.h != nil {
			g.h.end(ErrSevered)
			g.h = nil
		}
	}
}

// Driver returns the Provider and Runtime that driver epoch uses.
func (w *World) Driver(epoch int) (*Provider, *Runtime) {
	return &Provider{w: w, epoch: epoch}, &Runtime{w: w, epoch: epoch}
}

// Provider is one driver's view of the world's nodes.
type Provider struct {
	w     *World
	epoch int
}

var _ cloud.Provider = (*Provider)(nil)

// NextNotice is the next spot notice the world gives one of its nodes from the first call on
// (executor.Noticer), while the spec's notice is above 0; a driver cut off hears of none.
func (p *Provider) NextNotice(ctx context.Context) (cloud.Notice, error) {
	w := p.w
	w.mu.Lock()
	q := w.notices[p.epoch]
	if q == nil && !w.severed[p.epoch] {
		q = clock.NewQueue[cloud.Notice](w.clk)
		w.notices[p.epoch] = q
	}
	w.mu.Unlock()
	if q == nil {
		<-ctx.Done()
		return cloud.Notice{}, ErrSevered
	}
	return q.Get(ctx)
}

// offerFor is the model's offer a request asks for (empty fields: the cluster's own).
func (w *World) offerFor(req cloud.Request) (*sim.Offer, error) {
	want := sim.StageAlloc{Type: req.InstanceType, Market: string(req.Market)}
	if want.Type == w.exp.Cluster.InstanceType && w.model.Offers[0].Type == "" {
		want.Type = ""
	}
	if i, ok := w.model.OfferIndex(want); ok {
		return w.model.Offers[i], nil
	}
	return nil, &cloud.CapacityError{InstanceType: req.InstanceType, Market: req.Market, Reason: "the spec offers no such instance type in that market"}
}

// Create rents req.Count nodes as the model says: one SCALE latency for the request (the nodes
// bill from its end), then each node's INIT_INSTANCE and DATA; it returns when the slowest is
// ready. Under a token seen before it hands back what that request rented (as EC2's client
// tokens do). A driver cut off meanwhile gets nothing: what it rented stays in the world.
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	w := p.w
	w.mu.Lock()
	if w.severed[p.epoch] {
		w.mu.Unlock()
		return nil, ErrSevered
	}
	off, err := w.offerFor(req)
	if err != nil {
		w.mu.Unlock()
		return nil, err
	}
	if req.Count <= 0 {
		w.mu.Unlock()
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	r, seen := w.tokens[req.Token]
	if !seen || req.Token == "" {
		w.requests++
		r = w.rent(off, req.Count, req.Token)
		if req.Token != "" {
			w.tokens[req.Token] = r
		}
	}
	wait := r.ready.Sub(w.clk.Now())
	w.mu.Unlock()
	err = w.clk.Sleep(ctx, wait)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.severed[p.epoch] {
		return nil, ErrSevered // what it rented stays in the world: nobody is left to release it
	}
	if err != nil { // given up on: what it rented goes back
		for _, id := range r.nodes {
			if n, held := w.nodes[id]; held {
				w.release(n, "released: its request was cancelled")
			}
		}
		return nil, err
	}
	// Every node that started running is handed over, even one lost since: it billed, and the
	// driver learns of its loss as of any other's.
	var out []cloud.Node
	for _, id := range r.nodes {
		if n := w.rented[id]; n != nil && !n.RunningAt.IsZero() {
			out = append(out, n.Node)
		}
	}
	return out, nil
}

// rent starts count nodes of offer off; w.mu is held.
func (w *World) rent(off *sim.Offer, count int, token string) *request {
	now := w.clk.Now()
	rr := w.rng("request", w.requests)
	scale := time.Duration(off.Scale.Sample(rr) * float64(time.Second))
	r := &request{ready: now.Add(scale)}
	typ := off.Type
	if typ == "" {
		typ = w.exp.Cluster.InstanceType
	}
	market := cloud.Market(off.Market)
	if market == "" {
		market = cloud.OnDemand
	}
	for range count {
		w.created++
		n := &node{index: w.created, offer: off, gpus: make([]int, off.GPUsPerNode)}
		n.Node = cloud.Node{ID: fmt.Sprintf("v%04d", w.created), GPUs: off.GPUsPerNode, Addr: "10.0.0.1", InstanceType: typ,
			Market: market, PricePerHour: off.NodePricePerSecond * 3600, Token: token}
		rn := w.rng("node", n.index)
		if off.SlowShare > 0 && off.SlowFactor > 1 && rn.Float64() < off.SlowShare {
			n.Slowdown = off.SlowFactor
		}
		ready := scale + time.Duration((off.Init.Sample(rn)+off.DataLatency)*float64(time.Second))
		r.ready = maxTime(r.ready, now.Add(ready))
		w.nodes[n.ID], w.rented[n.ID] = n, n
		r.nodes = append(r.nodes, n.ID)
		if scale <= 0 { // running at once: a timer of 0 could fire after Create looked
			w.runningLocked(n)
			continue
		}
		n.timers = append(n.timers, w.clk.AfterFunc(scale, func() { w.running(n) }))
	}
	return r
}

// running starts node n's billing, and its spot interruption when the model draws one.
func (w *World) running(n *node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runningLocked(n)
}

// runningLocked is running with w.mu held.
func (w *World) runningLocked(n *node) {
	if n.gone {
		return
	}
	n.RunningAt = w.clk.Now()
	if sp := n.offer.Spot; sp != nil {
		life := sp.UntilInterrupted(w.rng("spot", n.index))
		if !math.IsInf(life, 1) && life < 1e9 {
			n.timers = append(n.timers, w.clk.AfterFunc(time.Duration(life*float64(time.Second)), func() {
				w.interrupt(n.ID, fmt.Sprintf("spot interruption notice (virtual): node %s ends in %s", n.ID, w.notice))
			}))
		}
	}
	if w.faults != nil {
		w.faults.nodeUp(w, n)
	}
}

// Interrupt gives node id its notice, as the spot market does when the model draws it; the node
// is gone a notice later unless the driver released it first. The drivers listening
// (NextNotice) hear of it at once, and the gangs on it train on until the node goes, then end
// interrupted, their checkpoints saved (unless the spec's on_notice is restart). With a notice of
// 0 the gangs end at once.
func (w *World) Interrupt(id, why string) { w.interrupt(id, why) }

func (w *World) interrupt(id, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, held := w.nodes[id]
	if !held || n.RunningAt.IsZero() {
		return
	}
	if n.notice != "" {
		return // one notice a node
	}
	n.notice = why
	save := w.exp.Cluster.Spot.OnNotice != spec.OnNoticeRestart
	stop := func() {
		for _, gid := range w.gangsOn(n) {
			w.end(w.gangs[gid], &interrupted{node: id, why: why}, save)
		}
	}
	if w.notice <= 0 {
		stop()
	}
	for epoch, q := range w.notices {
		if !w.severed[epoch] {
			q.Put(cloud.Notice{Node: id, Reason: why})
		}
	}
	n.timers = append(n.timers, w.clk.AfterFunc(w.notice, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		stop()
		w.takeAway(id, "interrupted: its notice ran out")
	}))
}

// lose takes node id away at once, as a machine that died: its gangs fail, nothing is saved.
func (w *World) lose(id, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.takeAway(id, why)
}

// takeAway ends node id's span and its gangs (failed, not saved); w.mu is held.
func (w *World) takeAway(id, why string) {
	n, held := w.nodes[id]
	if !held {
		return
	}
	for _, gid := range w.gangsOn(n) {
		w.end(w.gangs[gid], fmt.Errorf("node %s is gone (%s)", id, why), false)
	}
	w.release(n, why)
}

// release forgets a node and closes its span; w.mu is held.
func (w *World) release(n *node, why string) {
	n.gone = true
	for _, t := range n.timers {
		t.Stop()
	}
	delete(w.nodes, n.ID)
	if !n.RunningAt.IsZero() {
		w.spans = append(w.spans, NodeSpan{Node: n.ID, PricePerHour: n.PricePerHour, RunningAt: n.RunningAt, End: w.clk.Now(), Why: why})
	}
}

// Delete releases nodes: gangs still on them die with them.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.severed[p.epoch] {
		return ErrSevered
	}
	for _, id := range ids {
		if n, held := w.nodes[id]; held {
			for _, gid := range w.gangsOn(n) {
				w.end(w.gangs[gid], fmt.Errorf("node %s was released under the gang", id), false)
			}
			w.release(n, "released")
		}
	}
	return nil
}

// List returns the nodes held, by ID; a node still starting has no RunningAt.
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.severed[p.epoch] {
		return nil, ErrSevered
	}
	return w.held(), nil
}

// held is every node held, by ID; w.mu is held.
func (w *World) held() []cloud.Node {
	out := make([]cloud.Node, 0, len(w.nodes))
	for _, n := range w.nodes {
		out = append(out, n.Node)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Held is every node the world holds now.
func (w *World) Held() []cloud.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held()
}

// Spans is what the world billed for every node released or taken away so far.
func (w *World) Spans() []NodeSpan {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]NodeSpan(nil), w.spans...)
}

// Breaches are the runtime contract's rules the drivers broke (a GPU given twice, one trial's
// gangs running at once), in order.
func (w *World) Breaches() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.breaches...)
}

// Triggered is what the faults did, in order.
func (w *World) Triggered() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.triggered...)
}

// TrainedTwice names a trial trained up to one target by two gangs: work done twice.
func (w *World) TrainedTwice() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k, n := range w.trained {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s (%d times)", k, n))
		}
	}
	sort.Strings(out)
	return out
}

func (w *World) breach(format string, args ...any) {
	w.breaches = append(w.breaches, fmt.Sprintf("%s: ", w.clk.Now().Sub(Epoch))+fmt.Sprintf(format, args...))
}

func (w *World) trigger(format string, args ...any) {
	w.triggered = append(w.triggered, fmt.Sprintf("%s: ", w.clk.Now().Sub(Epoch).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
