package sim

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/spec"
)

// ASHAPlan is the GPU schedule of an ASHA job (one GPU a trial, on the default offer): GPUs[0]
// are held while trials remain to be started; then phase j begins the first time the work that
// can still run now (jobs running plus promotions waiting) is at most GPUs[j], and the cluster
// shrinks to GPUs[j]. The counts do not rise; each phase is keyed to an event, never to a time.
type ASHAPlan struct {
	GPUs []int `json:"gpus"`
}

func (p ASHAPlan) String() string {
	s := ""
	for i, g := range p.GPUs {
		if i > 0 {
			s += ">"
		}
		s += fmt.Sprint(g)
	}
	return s
}

// Compact is the same schedule without phases that hold what the one before holds: entering
// such a phase changes nothing (its GPUs are the last's, so is its threshold), so 8>4>4 runs
// as 8>4 does.
func (p ASHAPlan) Compact() ASHAPlan {
	var gpus []int
	for i, g := range p.GPUs {
		if i == 0 || g != p.GPUs[i-1] {
			gpus = append(gpus, g)
		}
	}
	return ASHAPlan{GPUs: gpus}
}

// CheckASHA says what is wrong with a plan for this model: no phase, a count that rises, or more
// nodes than the cluster allows.
func (m *Model) CheckASHA(p ASHAPlan) error {
	if len(p.GPUs) == 0 || p.GPUs[0] < 1 {
		return fmt.Errorf("asha plan %s: needs at least one GPU at the start", p)
	}
	for j := 1; j < len(p.GPUs); j++ {
		if p.GPUs[j] > p.GPUs[j-1] || p.GPUs[j] < 1 {
			return fmt.Errorf("asha plan %s: phase %d holds %d GPUs after %d (counts fall, at least 1)", p, j, p.GPUs[j], p.GPUs[j-1])
		}
	}
	if m.MaxNodes > 0 && m.NodesFor(p.GPUs[0]) > m.MaxNodes {
		return fmt.Errorf("asha plan %s: %d nodes (at most %d)", p, m.NodesFor(p.GPUs[0]), m.MaxNodes)
	}
	return nil
}

// ASHAOutcome is an ASHA prediction sample by sample, with what the promotion rule did.
type ASHAOutcome struct {
	Outcome
	// Promotions[b][k] is the mean number of trials rung k of bracket b promoted.
	Promotions [][]float64
	// IdleGPUSeconds is the mean GPU time held with nothing to run.
	IdleGPUSeconds float64
	// Interruptions is the mean number of spot interruptions of a node held.
	Interruptions float64
}

// SimulateASHA is the discrete-event Monte Carlo of an ASHA job under a plan: nodes start
// (SCALE, then each its INIT_INSTANCE and DATA), every free GPU takes the job the promotion rule
// (package asha) hands out, each job takes its start-up plus a fresh draw per iteration, and each
// result's rank is random (trials' metrics exchangeable, as the SHA model assumes). Nodes are
// billed from running until released. samples runs from seed's streams: the same arguments give
// the same numbers. Stragglers (profile.slow_nodes) take SlowFactor times as long for every job
// on them; spot nodes are interrupted as the model draws, their jobs relaunched first on the
// next free GPU (from what they had trained, or their rung's start with on_notice restart) and a
// replacement rented while the phase holds more nodes than are left. A model with Uncertainty
// draws each sample's training pace from it.
func (m *Model) SimulateASHA(cfg spec.ASHA, p ASHAPlan, samples int, seed uint64) (ASHAOutcome, error) {
	return m.SimulateASHAFrom(cfg, nil, p, samples, seed)
}

// ASHAStart is where an ASHA run stands when the rest of it is forecast (a re-plan): the
// promotion state, how far its jobs in flight got, and the nodes it holds.
type ASHAStart struct {
	// Ladder is the promotion state now. It is not changed: each sample works on a copy whose
	// results are redrawn in the order they rank (asha.Ladder.Redrawn), so that what the run
	// decided stands and what a later result beats is drawn as for any other.
	Ladder *asha.Ladder
	// Trained is the last iteration each job in flight reported, by trial (absent: none since
	// its rung's start); Running says which of them run now (start-up behind them), the others
	// wait to be launched again.
	Trained map[int]int
	Running map[int]bool
	// Nodes is how many nodes the run holds, ready for jobs: billed from now, their start-up
	// and data paid for.
	Nodes int
}

// SimulateASHAFrom is SimulateASHA of the rest of a run from start (nil: from its beginning),
// plan's phase 0 the one it is in: times from now, the cost of what is left to spend.
func (m *Model) SimulateASHAFrom(cfg spec.ASHA, start *ASHAStart, p ASHAPlan, samples int, seed uint64) (ASHAOutcome, error) {
	if err := m.CheckASHA(p); err != nil {
		return ASHAOutcome{}, err
	}
	out := ASHAOutcome{Outcome: Outcome{JCT: make([]float64, samples), Cost: make([]float64, samples)}}
	for b := range max(cfg.Brackets, 1) {
		out.Promotions = append(out.Promotions, make([]float64, len(cfg.Rungs(b))))
	}
	iter := m.IterLatency(1)
	// Samples run side by side, each on its own stream; what they add up is summed in sample
	// order, so that the numbers are the same on any number of cores.
	idle, interrupted := make([]float64, samples), make([]int, samples)
	promotions := make([][][]int, samples)
	workers := min(runtime.GOMAXPROCS(0), samples)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s ashaRun // one a worker: its samples reuse its memory (garbage collection was a third of the time)
			for i := w; i < samples; i += workers {
				s.reuse(ashaRun{m: m, cfg: cfg, plan: p, r: rand.New(rand.NewPCG(seed, uint64(i))), iter: iter})
				s.run(start)
				out.JCT[i], out.Cost[i], idle[i], interrupted[i] = s.end, s.cost, s.idle, s.interruptions
				promotions[i] = make([][]int, len(out.Promotions))
				for b := range out.Promotions {
					for k := range out.Promotions[b] {
						promotions[i][b] = append(promotions[i][b], s.ladder.Promotions(b, k))
					}
				}
			}
		}()
	}
	wg.Wait()
	for i := range samples {
		out.IdleGPUSeconds += idle[i] / float64(samples)
		out.Interruptions += float64(interrupted[i]) / float64(samples)
		for b := range out.Promotions {
			for k := range out.Promotions[b] {
				out.Promotions[b][k] += float64(promotions[i][b][k]) / float64(samples)
			}
		}
	}
	return out, nil
}

// ScheduleASHA is one sampled run of an ASHA plan (seeded) laid out on its nodes for a Gantt
// chart: a row per node rented (replacements get rows of their own), each job a span on its GPU
// (Stage its rung, Trial its index in the ladder), each phase's start a StageEnds line.
func (m *Model) ScheduleASHA(cfg spec.ASHA, p ASHAPlan, seed uint64) (Schedule, error) {
	if err := m.CheckASHA(p); err != nil {
		return Schedule{}, err
	}
	sc := &Schedule{GPUsPerNode: m.GPUsPerNode, Rungs: true}
	s := ashaRun{m: m, cfg: cfg, plan: p, r: rand.New(rand.NewPCG(seed, 0x5c4ed)), iter: m.IterLatency(1), rec: sc}
	s.run(nil)
	sc.Rows = len(s.nodes)
	return *sc, nil
}

// ashaRun is one sample.
type ashaRun struct {
	m      *Model
	cfg    spec.ASHA
	plan   ASHAPlan
	r      *rand.Rand
	iter   Dist
	ladder *asha.Ladder

	now, end, cost, idle float64
	phase                int
	nodes                []*ashaNode
	jobs                 []ashaLaunch
	resume               []ashaLaunch // jobs whose node was interrupted, to relaunch first
	events               ashaEvents
	pushed               int // events so far: the order of simultaneous ones
	busy                 int // GPUs running a job
	interruptions        int
	rented               int            // nodes rented (not held at the start): each pays DATA's cost
	pace                 float64        // the model's own error this sample (Uncertainty): training takes pace times as long
	lag                  float64        // the first-stage lag of this sample's first wave; 0 once a job has ended
	rec                  *Schedule      // when set, the sample's spans (ScheduleASHA)
	burst                Burst[float64] // the launches at one moment, which queue (Offer.Contention)

	// Indexes that keep each event's cost from growing with the nodes: an event changes one
	// node, yet a scan of them all on every event made planning quadratic in the trials.
	free    [][]uint64 // free[b]: a bitset of the nodes up, not draining, with b of their GPUs busy and one free
	live    int        // nodes neither released nor draining
	held    int        // GPUs on nodes counted as billed: not released and running before the clock
	pending []int      // nodes not released and not yet counted in held
}

type ashaNode struct {
	id       int     // index in ashaRun.nodes
	freeAt   int     // the free set it is in (its busy GPUs), -1: none
	counted  bool    // its GPUs are in ashaRun.held
	jobs     []int   // its jobs in flight, as indexes in ashaRun.jobs, oldest first
	ready    float64 // when its GPUs can take jobs (running + init + data)
	running  float64 // when billing starts
	slow     float64 // how many times longer its jobs take (a straggler's SlowFactor, else 1)
	up       bool
	busy     int
	draining bool // released once its last job ends
	released bool
	// doomed says the node had its spot notice (Spot.Notice): it takes no job, and its jobs
	// train on until its replacement is ready or it goes.
	doomed   bool
	replaces int    // the doomed node it replaces, -1: none
	gpus     []bool // which GPUs run a job, when recording
}

// ashaLaunch is a launch of a trial through a rung: its start-up and training seconds before the
// node's slowness, and when it began.
type ashaLaunch struct {
	trial, node          int
	bracket, rung, gpu   int
	began, startup, work float64
	lag                  float64 // how late it gets going: the first-stage lag, for the first wave
	ended                bool    // done, or interrupted
}

// What an event is: a node ready for jobs, a job done, a node interrupted (spot: its notice),
// a doomed node gone (its notice ran out).
const (
	ashaReady = iota
	ashaDone
	ashaInterrupt
	ashaGone
)

type ashaEvent struct {
	at   float64
	kind int
	node int
	job  int // ashaDone: index in jobs
	seq  int
}

// ashaEvents is a heap of events, the earliest (then the first pushed) at [0]; typed, not
// container/heap's, whose boxing of every event was a tenth of a plan's time.
type ashaEvents []ashaEvent

func (h ashaEvents) less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

func (s *ashaRun) push(at float64, kind, node, job int) {
	s.pushed++
	h := append(s.events, ashaEvent{at: at, kind: kind, node: node, job: job, seq: s.pushed})
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	s.events = h
}

func (s *ashaRun) pop() ashaEvent {
	h := s.events
	e := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	s.events = h
	return e
}

// reuse makes s the fresh sample next, keeping the memory of the sample s was.
func (s *ashaRun) reuse(next ashaRun) {
	jobs, events, nodes, pending, free, ladder := s.jobs[:0], s.events[:0], s.nodes[:0], s.pending[:0], s.free, s.ladder
	for _, set := range free {
		clear(set)
	}
	*s = next
	s.jobs, s.events, s.nodes, s.pending, s.free, s.ladder = jobs, events, nodes, pending, free, ladder
}

func (s *ashaRun) run(start *ASHAStart) {
	if s.jobs == nil {
		s.jobs = make([]ashaLaunch, 0, 2*s.cfg.Trials)
	}
	s.pace = 1
	if s.m.Uncertainty > 0 {
		s.pace = max(0.5, 1+s.m.Uncertainty*s.r.NormFloat64())
	}
	if start != nil {
		s.resumeFrom(start)
	} else {
		if s.ladder == nil {
			s.ladder = asha.New(s.cfg)
		} else {
			s.ladder.Reset()
		}
		// The jobs that start before any has ended, the run's first wave, get going late by
		// one draw of the first-stage lag (a Constant 0 draws nothing).
		s.lag = s.m.FirstLag.Sample(s.r)
		scale := s.m.Scale.Sample(s.r)
		for range s.m.NodesFor(s.plan.GPUs[0]) {
			s.rent(0, scale)
		}
	}
	for len(s.events) > 0 && !s.ladder.Done() {
		e := s.pop()
		s.advance(e.at)
		n := s.nodes[e.node]
		switch e.kind {
		case ashaReady:
			n.up = !n.released
			s.index(n)
			if d := n.replaces; d >= 0 && !s.m.Spot.Restart {
				s.evict(s.nodes[d]) // its replacement is up: the doomed node's jobs move
			}
		case ashaDone:
			j := &s.jobs[e.job]
			if j.ended {
				continue
			}
			s.stop(e.job)
			n.busy--
			s.busy--
			s.index(n)
			s.lag = 0
			s.ladder.Report(j.trial, s.r.Float64())
			if n.draining && n.busy == 0 {
				s.release(n)
			}
			s.shrink()
		case ashaInterrupt:
			if n.released || n.doomed {
				continue
			}
			s.interrupt(e.node)
		case ashaGone:
			s.evict(n)
		}
		s.fill()
		if s.ladder.Done() {
			break
		}
	}
	s.end = s.now
	for _, n := range s.nodes {
		s.release(n)
	}
	s.cost += float64(s.rented) * s.m.DataCost
}

// resumeFrom sets the sample where start stands: its ladder redrawn, its nodes held (ready,
// billed from now; as likely to be slow or interrupted from now on as any), more rented when the
// phase holds more, the running jobs on them with what they have left to train, the others
// waiting to be launched first.
func (s *ashaRun) resumeFrom(start *ASHAStart) {
	s.ladder = start.Ladder.Redrawn(func(_, _, n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = s.r.Float64()
		}
		slices.Sort(v)
		return v
	})
	for range start.Nodes {
		s.addNode(&ashaNode{slow: 1, up: true, replaces: -1})
	}
	if n := s.m.NodesFor(s.cap()) - start.Nodes; n > 0 {
		scale := s.m.Scale.Sample(s.r)
		for range n {
			s.rent(0, scale)
		}
	}
	for _, j := range s.ladder.Jobs() {
		left := j.To - max(j.From, start.Trained[j.Trial])
		l := ashaLaunch{trial: j.Trial, bracket: j.Bracket, rung: j.Rung, work: s.pace * SampleSum(s.iter, max(left, 0), s.r)}
		if n := s.pick(); start.Running[j.Trial] && n >= 0 {
			s.launch(l, n)
		} else {
			s.resume = append(s.resume, l)
		}
	}
	s.shrink()
	s.fill()
}

// stop ends job k now (done or interrupted), its span recorded when recording.
func (s *ashaRun) stop(k int) {
	j := &s.jobs[k]
	j.ended = true
	n := s.nodes[j.node]
	n.jobs = slices.Delete(n.jobs, slices.Index(n.jobs, k), slices.Index(n.jobs, k)+1)
	if s.rec != nil {
		s.nodes[j.node].gpus[j.gpu] = false
		s.rec.Spans = append(s.rec.Spans, Span{Row: j.node, Start: j.began, End: s.now, GPU: j.gpu, GPUs: 1, Bracket: j.bracket, Stage: j.rung, Trial: j.trial})
	}
}

// rent starts a node now: billed once its SCALE (scale seconds) ends, ready for jobs after its
// INIT_INSTANCE and DATA, a straggler with the model's odds, and interrupted when the spot model
// draws it.
func (s *ashaRun) rent(now, scale float64) {
	n := &ashaNode{running: now + scale, slow: 1, replaces: -1}
	n.ready = n.running + s.m.Init.Sample(s.r) + s.m.DataLatency
	if s.rec != nil {
		s.rec.Spans = append(s.rec.Spans, Span{Row: len(s.nodes), Start: now, End: n.ready, GPUs: s.m.GPUsPerNode, Provision: true})
	}
	s.rented++
	s.addNode(n)
}

// addNode takes node n on: up once ready (held ones are), a straggler with the model's
// odds, interrupted when the spot model draws it.
func (s *ashaRun) addNode(n *ashaNode) {
	if s.rec != nil {
		n.gpus = make([]bool, s.m.GPUsPerNode)
	}
	if s.m.SlowShare > 0 && s.r.Float64() < s.m.SlowShare {
		n.slow = s.m.SlowFactor
	}
	s.nodes = append(s.nodes, n)
	i := len(s.nodes) - 1
	n.id, n.freeAt = i, -1
	s.live++
	s.pending = append(s.pending, i)
	s.index(n)
	if !n.up {
		s.push(n.ready, ashaReady, i, -1)
	}
	if s.m.Spot != nil && s.interruptions < maxInterruptions {
		if life := s.m.Spot.UntilInterrupted(s.r); !math.IsInf(life, 1) {
			s.push(n.running+life, ashaInterrupt, i, -1)
		}
	}
}

// interrupt gives node i its notice: a replacement is rented while the phase holds more nodes
// than are left, and the node's jobs go back to be relaunched first (from a checkpoint of what
// they had trained, or from their rung's start with Restart): at once without a notice; with
// one (Spot.Notice), the node takes no more jobs and its jobs train on until the replacement is
// ready or the node goes (with Restart: until it goes, in case they get done).
func (s *ashaRun) interrupt(i int) {
	s.interruptions++
	n := s.nodes[i]
	if notice := s.m.Spot.Notice; notice > 0 {
		if !n.draining {
			n.draining = true
			s.live--
		}
		n.doomed = true
		s.index(n)
		if n.busy == 0 {
			s.release(n)
		} else {
			s.push(s.now+notice, ashaGone, i, -1)
		}
		if s.live < s.m.NodesFor(s.cap()) {
			s.rent(s.now, s.m.Scale.Sample(s.r))
			s.nodes[len(s.nodes)-1].replaces = i
		}
		return
	}
	s.evict(n)
	if s.live < s.m.NodesFor(s.cap()) {
		s.rent(s.now, s.m.Scale.Sample(s.r))
	}
}

// evict takes node n away now: its jobs go back to be relaunched first, from a checkpoint of
// what they had trained (from their rung's start with Restart).
func (s *ashaRun) evict(n *ashaNode) {
	if n.released {
		return
	}
	for _, k := range slices.Clone(n.jobs) { // oldest first, as a scan of every job met them
		j := &s.jobs[k]
		s.stop(k)
		n.busy--
		s.busy--
		trained := max(0, (s.now-j.began-j.lag)/n.slow-j.startup)
		left := j.work
		if !s.m.Spot.Restart {
			left = max(0, j.work-trained)
		}
		s.resume = append(s.resume, ashaLaunch{trial: j.trial, bracket: j.bracket, rung: j.rung, work: left})
	}
	s.release(n)
}

// advance moves the clock, counting the GPU time held idle: a node's GPUs count over the whole
// step to t once it is billed before t (and not released).
func (s *ashaRun) advance(t float64) {
	for k := 0; k < len(s.pending); {
		n := s.nodes[s.pending[k]]
		switch {
		case n.released:
		case t > n.running:
			n.counted = true
			s.held += s.m.GPUsPerNode
		default:
			k++
			continue
		}
		s.pending[k] = s.pending[len(s.pending)-1]
		s.pending = s.pending[:len(s.pending)-1]
	}
	s.idle += float64(s.held-s.busy) * (t - s.now)
	s.now = t
}

// index puts node n in the free set of its load, or in none when it cannot take a job.
func (s *ashaRun) index(n *ashaNode) {
	b := n.busy
	if !n.up || n.draining || n.released || b >= s.m.GPUsPerNode {
		b = -1
	}
	if b == n.freeAt {
		return
	}
	word, bit := n.id/64, uint64(1)<<(n.id%64)
	if n.freeAt >= 0 {
		s.free[n.freeAt][word] &^= bit
	}
	if b >= 0 {
		if s.free == nil {
			s.free = make([][]uint64, s.m.GPUsPerNode)
		}
		for len(s.free[b]) <= word {
			s.free[b] = append(s.free[b], 0)
		}
		s.free[b][word] |= bit
	}
	n.freeAt = b
}

// cap is how many jobs may run at once in the current phase.
func (s *ashaRun) cap() int { return s.plan.GPUs[s.phase] }

// fill hands a job to every free GPU, the busiest node's first (so that others drain and can be
// released): interrupted jobs first, then the promotion rule's while fewer than the phase's GPUs
// are in flight.
func (s *ashaRun) fill() {
	for {
		n := s.pick()
		if n < 0 {
			return
		}
		var j ashaLaunch
		switch {
		case len(s.resume) > 0:
			j, s.resume = s.resume[0], s.resume[1:]
			j.startup = s.m.LaunchSample(s.r)
		case s.ladder.InFlight() < s.cap():
			next, ok := s.ladder.Next()
			if !ok {
				return
			}
			j.trial, j.bracket, j.rung, j.startup = next.Trial, next.Bracket, next.Rung, s.m.LaunchSample(s.r)
			j.lag = s.lag
			j.work = s.pace * SampleSum(s.iter, next.To-next.From, s.r)
		default:
			return
		}
		s.launch(j, n)
	}
}

// launch starts job j on a free GPU of node n now.
func (s *ashaRun) launch(j ashaLaunch, n int) {
	node := s.nodes[n]
	j.node, j.began = n, s.now
	j.startup += s.m.Contention.At(1) * float64(s.burst.Place(s.now)) // a job a GPU
	if s.rec != nil {
		j.gpu = slices.Index(node.gpus, false)
		node.gpus[j.gpu] = true
	}
	work := (j.startup + j.work) * node.slow
	d := j.lag + work
	if s.m.PerFunction { // the lag is waited out, not billed (as the DAG's FIRST_STAGE_LAG)
		s.cost += work * s.m.GPUPricePerSecond()
	}
	node.busy++
	s.busy++
	s.jobs = append(s.jobs, j)
	node.jobs = append(node.jobs, len(s.jobs)-1)
	s.index(node)
	s.push(s.now+d, ashaDone, n, len(s.jobs)-1)
}

// pick is the node a job goes to: of those with a free GPU, the busiest, the first rented at
// equal load; -1 when none has one.
func (s *ashaRun) pick() int {
	for b := len(s.free) - 1; b >= 0; b-- {
		for w, set := range s.free[b] {
			if set != 0 {
				return 64*w + bits.TrailingZeros64(set)
			}
		}
	}
	return -1
}

// shrink enters the next phases once every trial has started and the work that can run now
// fits them, and releases nodes down to the phase's (a run re-planned may hold more than its
// first): idle ones at once, the least busy of the rest when their jobs end.
func (s *ashaRun) shrink() {
	if s.ladder.Started() >= s.cfg.Trials {
		demand := s.ladder.InFlight() + s.ladder.Promotable()
		for s.phase+1 < len(s.plan.GPUs) && demand <= s.plan.GPUs[s.phase+1] {
			s.phase++
			if s.rec != nil {
				s.rec.StageEnds = append(s.rec.StageEnds, s.now)
			}
		}
	}
	keep := s.m.NodesFor(s.cap())
	if s.live <= keep {
		return // what follows would release none: spare the sort on every event
	}
	var live []*ashaNode
	for _, n := range s.nodes {
		if !n.released && !n.draining {
			live = append(live, n)
		}
	}
	slices.SortStableFunc(live, func(a, b *ashaNode) int { return a.busy - b.busy })
	for _, n := range live[:max(len(live)-keep, 0)] {
		if n.busy == 0 {
			s.release(n)
		} else {
			n.draining = true
			s.live--
			s.index(n)
		}
	}
}

func (s *ashaRun) release(n *ashaNode) {
	if n.released {
		return
	}
	if !n.draining {
		s.live--
	}
	if n.counted {
		s.held -= s.m.GPUsPerNode
	}
	n.released, n.up = true, false
	s.index(n)
	if !s.m.PerFunction && s.now > n.running {
		s.cost += s.m.Bill(s.now-n.running, s.m.NodePricePerSecond)
	}
}
