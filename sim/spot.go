package sim

import (
	"math"
	"math/rand/v2"
)

// Spot models spot interruptions (cluster.market spot). Each node is interrupted as a Poisson
// process of Rate per second, or, with Lifetimes, after a lifetime drawn afresh when the node
// starts its part of a stage (at the stage's start for a node up already; at the end of its
// SCALE for a new one, a replacement included).
//
// With a Notice, the executor hears of an interruption when it is given (the runtimes pass a
// node's notice on) and trains through it: the replacement (a new SCALE, INIT_INSTANCE and DATA)
// is asked for at the notice, the doomed node takes no new gang, and its gangs train on until
// their room is there (the replacement, or free room in a hedged stage) or the node goes, then
// relaunch from their checkpoints (a start-up again): at their next checkpoint, losing nothing,
// or, when the node goes first, losing the iteration under way; with Restart, the launch's work
// so far. A gang that ends within that time is not relaunched. The doomed node bills until its
// gangs stop. A node noticed with no gang running but one to come is replaced at once, the
// coming gang waiting only for what is left of the replacement's latency; one with none left is
// released. Without a notice (0) the executor learns of a loss from the node's gangs: at once when
// a gang runs there (the notice stops it, the iteration under way lost), else at the next launch
// there (a replacement still starting), when the node is replaced.
//
// Either way, a node lost while provisioning, waiting for the rest of a scale-up, or between two
// stages is found lost at the next stage's start if that stage keeps it (then its first gangs
// wait for a replacement); one the next stage releases delays nothing.
type Spot struct {
	Rate      float64 // interruptions per node-second; 0 when Lifetimes is set
	Lifetimes Dist    // a node's time to its interruption; nil when Rate is used
	Restart   bool    // an interrupted launch loses its work (no checkpoint within the notice)
	// Notice is how long (seconds) a node runs on after its interruption notice
	// (cluster.spot.notice: EC2's 120, GCP's and Azure's 30); 0: the notice ends its gangs.
	Notice float64
}

// maxInterruptions bounds the interruptions drawn for one sample of a stage: past it the
// stage's end stands as it is (an absurd rate then shows as an absurd JCT, not as a hang).
const maxInterruptions = 10000

// UntilInterrupted draws how long (seconds) a node that starts now runs before it is
// interrupted: +Inf for never.
func (sp *Spot) UntilInterrupted(r *rand.Rand) float64 {
	if sp.Lifetimes != nil {
		return sp.Lifetimes.Sample(r)
	}
	if sp.Rate <= 0 {
		return math.Inf(1)
	}
	return r.ExpFloat64() / sp.Rate
}

// slotNodes are the nodes, first to last, that hold slot j's GPUs when each slot has gpt of them:
// GPU x is on node x / GPUsPerNode, as placement packs them.
func (m *Offer) slotNodes(j, gpt, nodes int) (int, int) {
	gpn := max(m.GPUsPerNode, 1)
	return min(j*gpt/gpn, nodes-1), min(((j+1)*gpt-1)/gpn, nodes-1)
}

// slows says whether some of the offer's nodes run slow (slow_nodes): its stages are drawn
// trial by trial, the slow ones stretched.
func (m *Offer) slows() bool { return m.SlowShare > 0 && m.SlowFactor > 1 }

// slowDown makes the TRAIN nodes of one sample whose gang runs on a slow node (each of the
// stage's nodes is, with probability SlowShare) take SlowFactor times as long, and returns the
// stage's new end.
func (m *Offer) slowDown(g *DAG, nodes, gpt int, r *rand.Rand, finish, latency []float64) float64 {
	slow := make([]bool, nodes)
	some := false
	for n := range slow {
		slow[n] = r.Float64() < m.SlowShare
		some = some || slow[n]
	}
	if some {
		for i, n := range g.Nodes {
			if n.Kind != Train {
				continue
			}
			first, last := m.slotNodes(n.Slot, gpt, nodes)
			for x := first; x <= last; x++ {
				if slow[x] {
					latency[i] *= m.SlowFactor
					break
				}
			}
		}
	}
	return g.finishAll(finish, latency)
}

// interruptions is what spot interruptions did to one sample of a stage.
type interruptions struct {
	count    int     // nodes found lost and replaced
	moved    int     // nodes found lost whose gangs all moved to free on-demand room: not replaced
	unbilled float64 // node-seconds not billed: each replacement's SCALE, between the end of
	// the interrupted instance and the start of the new one
	calm       float64 // the stage's end had nothing been interrupted
	gpuSeconds float64 // TRAIN GPU-seconds the relaunches add (what per-function billing charges)
	// idle has a bit for each node (the first 64) lost while idle at the stage's SYNC: its gangs
	// of the stage had ended. The next stage finds it lost at its start if it keeps it.
	idle uint64
}

// idleBits is how many nodes of a stage interruptions.idle follows: the nodes past them are
// taken to last to the SYNC.
const idleBits = 64

// keptMask is the idle bits of a stage's first kept nodes: the next stage keeps the nodes of
// the stage before it in order (which ones a real run keeps depends on where its best trials
// ran, which has nothing to do with which nodes were interrupted).
func keptMask(kept int) uint64 {
	if kept >= idleBits {
		return ^uint64(0)
	}
	return 1<<kept - 1
}

// spotLayout is what interrupt needs of a stage's DAG that no sample changes (the TRAIN nodes
// of each slot, the slots on each node), with buffers it reuses from sample to sample.
type spotLayout struct {
	slots, onNode [][]int
	// A relaunch's start and start-up, by TRAIN node: set in this call of interrupt where
	// relaunched is gen.
	began, startup []float64
	iter           []float64 // a relaunched TRAIN node's iteration time (iterTime)
	relaunched     []uint32
	gen            uint32
	first, next    []float64 // when each node is first interrupted (firstInterruptions); next
	// onDemand is how many of the stage's first nodes are on demand (a hedged stage): never
	// interrupted, and room for interrupted gangs once their own are done. With some, slots is
	// copied to chains for each sample (a gang that moves takes its slot's later trials along);
	// chains past slots are the standby room's, empty at the stage's start.
	onDemand int
	chains   [][]int
	odSlots  []int // the slots wholly on the on-demand nodes, the standby room's included
	// spotSlots are the chains on spot nodes, each with its nodes (spotNodes): the slots', then
	// the standby room's on the spot tier (a gang's worth of a spot node the slots leave spare).
	// One whose trials are done is room too, as the executor uses any free GPUs, when no
	// on-demand room is free; it is interrupted as any spot node.
	spotSlots []int
	spotNodes [][]int
	// goneAt is, for each spot node gone without a replacement (every gang it ran moved, or
	// noticed idle and released), when; NaN for the others. It bills no more from then.
	goneAt []float64
	// doomed is, by TRAIN node, how its launch cut by a notice trains on (set in this call of
	// interrupt where doomedGen is gen): a gang on several nodes trains on through a second
	// node's notice until that node's replacement is up too.
	doomed    []doomedLaunch
	doomedGen []uint32
}

// doomedLaunch is a launch training through a notice: it trains from base at one iteration
// every it seconds, would have been done at orig, and stops at stop (its first checkpoint once
// its room is there, at room, unless a node goes first, at goes), from its last checkpoint
// (from); added is what the cut added to its launch time.
type doomedLaunch struct {
	base, it, orig, room, goes, stop, from, added float64
	noticed                                       int // its nodes noticed so far: each bills until it stops
}

// newSpotLayout lays a stage's slots on its nodes as placement packs them: GPU x on node
// x / GPUsPerNode. In a hedged stage (onDemand of the nodes on demand, the first ones) whose
// nodes are more than its GPUs need, the spare nodes are standby room on the on-demand tier,
// after the on-demand nodes that hold slots (the first: the critical chains) and before the
// spot ones, as many as there are on-demand nodes to spare; a gang's worth of standby room
// counts as an empty on-demand slot.
func (m *Offer) newSpotLayout(g *DAG, nodes, gpt, onDemand int) *spotLayout {
	l := &spotLayout{onNode: make([][]int, nodes), onDemand: onDemand, began: make([]float64, len(g.Nodes)), startup: make([]float64, len(g.Nodes)), iter: make([]float64, len(g.Nodes)),
		relaunched: make([]uint32, len(g.Nodes)), first: make([]float64, nodes), next: make([]float64, nodes),
		doomed: make([]doomedLaunch, len(g.Nodes)), doomedGen: make([]uint32, len(g.Nodes))}
	for i, n := range g.Nodes {
		if n.Kind != Train {
			continue
		}
		for len(l.slots) <= n.Slot {
			l.slots = append(l.slots, nil)
		}
		l.slots[n.Slot] = append(l.slots[n.Slot], i)
	}
	gpn := max(m.GPUsPerNode, 1)
	standby := 0 // spare on-demand nodes, after the first holding slots
	if onDemand > 0 {
		standby = min(onDemand, nodes-(len(l.slots)*gpt+gpn-1)/gpn)
	}
	busy := onDemand - standby // on-demand nodes that hold slots
	at := func(n int) int {    // where the node-th node of the packed slots is
		if n >= busy {
			return min(n+standby, nodes-1)
		}
		return n
	}
	for j := range l.slots {
		first, last := m.slotNodes(j, gpt, nodes-standby)
		var on []int
		for n := first; n <= last; n++ {
			l.onNode[at(n)] = append(l.onNode[at(n)], j)
			on = append(on, at(n))
		}
		if at(last) < onDemand {
			l.odSlots = append(l.odSlots, j)
		} else if onDemand > 0 {
			l.spotSlots, l.spotNodes = append(l.spotSlots, j), append(l.spotNodes, on)
		}
	}
	if onDemand > 0 {
		room := 0 // gangs the standby room holds
		if gpt <= gpn {
			room = standby * (gpn / gpt)
		} else {
			room = standby * gpn / gpt
		}
		for j := range room {
			l.odSlots = append(l.odSlots, len(l.slots)+j)
		}
		chains := len(l.slots) + room
		span := max(1, (gpt+gpn-1)/gpn) // nodes a gang spans
		per := max(1, gpn/gpt)          // gangs a node holds
		needed := (len(l.slots)*gpt + gpn - 1) / gpn
		for n := needed + standby; n+span <= nodes; n += span {
			for range per {
				var on []int
				for x := n; x < n+span; x++ {
					l.onNode[x] = append(l.onNode[x], chains)
					on = append(on, x)
				}
				l.spotSlots, l.spotNodes = append(l.spotSlots, chains), append(l.spotNodes, on)
				chains++
			}
		}
		l.chains = make([][]int, chains)
	}
	l.goneAt = make([]float64, nodes)
	return l
}

// iterTime is TRAIN node i's iteration time: its training (work seconds, after the start-up)
// over its iterations, as its first launch has it (a relaunch trains the rest at that pace).
func (l *spotLayout) iterTime(g *DAG, i int, work float64) float64 {
	if l.relaunched[i] == l.gen {
		return l.iter[i]
	}
	l.iter[i] = work / float64(max(g.Nodes[i].Iters, 1))
	return l.iter[i]
}

// boundary is the checkpoint (an iteration's end) of a launch that trains from `from` at one
// iteration every it seconds: the first at or after t (up), else the last at or before it.
func boundary(from, it, t float64, up bool) float64 {
	if it <= 0 || t <= from {
		return max(t, from)
	}
	k := (t - from) / it
	if up {
		return from + math.Ceil(k-1e-9)*it
	}
	return from + math.Floor(k+1e-9)*it
}

// trainThrough is where a launch that trains from base at one iteration every it seconds, and
// would be done at orig, stops training through a notice: at its first checkpoint once its room
// is there (at room), unless a node goes first (at goes; then the iteration under way is lost);
// with restart it trains until the node goes, in case it gets done, and keeps nothing. It returns
// when it stops and the point its relaunch trains from (its last checkpoint), or orig twice and
// done when it got done first.
func trainThrough(base, it, orig, room, goes float64, restart bool) (stop, from float64, done bool) {
	stop = boundary(base, it, max(room, base), true)
	if restart || stop >= goes {
		stop = goes
	}
	if orig <= stop {
		return orig, orig, true
	}
	if restart {
		return stop, base, false
	}
	return stop, max(boundary(base, it, stop, false), base), false
}

// firstInterruptions draws, for one sample of a stage, when each of its nodes is first
// interrupted (from the stage's start): interrupt's draws, which the versions of the sample
// share (common random numbers).
func (m *Offer) firstInterruptions(l *spotLayout, r *rand.Rand) {
	for n := range l.first {
		l.first[n] = m.Spot.UntilInterrupted(r)
		if n < l.onDemand { // drawn all the same: the spot nodes keep the draws of the unhedged stage
			l.first[n] = math.Inf(1)
		}
	}
}

// interrupt lays spot interruptions over one sample of a stage's TRAIN nodes (g as addTrain
// built it, finish and latency as CriticalPath drew them, end their latest finish; the nodes
// first interrupted when firstInterruptions drew, the rest from r), in place: a gang hit at
// time t trains on through the notice (Spot.Notice; none: it stops at once) until its
// replacement is up or its node goes, then starts up again and trains what it had left since
// its last checkpoint (with Restart, all of its launch's work); the gangs after it on its slot
// move with it. A slot's gang runs on the nodes that hold its GPUs (GPU x on node x /
// GPUsPerNode, as placement packs them); one of them noticed while the gang trains on through
// another's notice keeps it training until that replacement is up too (doomedLaunch). A node
// interrupted while none of its gangs runs is replaced at once with a notice; without one it
// is found lost by the next gang launched there, and hit then; with none left, it is lost idle
// (interruptions.idle). Node lost, unless it is -1, is found lost at the stage's start (lost
// while provisioning, or idle before): gone already.
//
// In a hedged stage (l.onDemand) the first nodes are on demand and never interrupted. A gang hit
// on a spot node moves, with its slot's later trials, to an on-demand slot whose trials are all
// done, else to such a spot slot (spare spot nodes' included) on a node not lost, when there is
// one: it restarts there at its next checkpoint (a start-up, and with Restart its lost work)
// instead of after a replacement's latency. A spot node whose running gangs all moved is not
// replaced, nor billed once they stopped (found lost then): the next gang launched there, if
// any, finds it lost and waits for a replacement.
//
// It returns the stage's new end (its SYNC) and what the interruptions cost.
func (m *Offer) interrupt(l *spotLayout, g *DAG, r *rand.Rand, end float64, finish, latency []float64, lost int) (float64, interruptions) {
	slots, onNode := l.slots, l.onNode
	if l.chains != nil {
		for j := range l.chains {
			l.chains[j] = l.chains[j][:0]
			if j < len(l.slots) {
				l.chains[j] = append(l.chains[j], l.slots[j]...)
			}
		}
		slots = l.chains
	}
	for n := range l.goneAt {
		l.goneAt[n] = math.NaN()
	}
	// freeSlot is an on-demand slot whose trials are all done at t, else such a slot of the
	// spot nodes not lost, or -1.
	freeSlot := func(t float64) int {
		for _, j := range l.odSlots {
			if c := slots[j]; len(c) == 0 || finish[c[len(c)-1]] <= t {
				return j
			}
		}
	spot:
		for k, j := range l.spotSlots {
			for _, x := range l.spotNodes[k] {
				if !math.IsNaN(l.goneAt[x]) || l.next[x] <= t {
					continue spot // lost, or about to be
				}
			}
			if c := slots[j]; len(c) == 0 || finish[c[len(c)-1]] <= t {
				return j
			}
		}
		return -1
	}
	// Each TRAIN node's current launch: when it began, and its start-up with the run path's
	// overhead. A relaunch's are its own (began, startup); any other launch began its latency
	// before it ends, and starts up in the model's mean (its draw is inside its latency). Only
	// relaunches are written down.
	launch, _ := m.Launch()
	if l.gen++; l.gen == 0 {
		clear(l.relaunched)
		clear(l.doomedGen)
		l.gen = 1
	}
	began := func(i int) float64 {
		if l.relaunched[i] == l.gen {
			return l.began[i]
		}
		return finish[i] - latency[i]
	}
	startup := func(i int) float64 {
		if l.relaunched[i] == l.gen {
			return l.startup[i]
		}
		return min(launch, latency[i])
	}
	next := l.next
	copy(next, l.first)
	if lost >= 0 {
		next[lost] = 0
	}
	out := interruptions{calm: end}
	// A gang may end sooner than an interruption had it (training on through a second notice,
	// it got done): the stage's end is then found again, from its waits and its gangs (shrunk).
	shrunk, waits := false, 0.0
	lastTrain := func() float64 { // the latest finish of the stage's gangs
		last := 0.0
		for _, c := range slots {
			for _, i := range c {
				last = max(last, finish[i])
			}
		}
		return last
	}
	afterTrain := end - lastTrain() // what the stage's end adds to its gangs'
	foundLost := lost               // gone already: its gangs cannot train on
	for out.count < maxInterruptions {
		n := 0
		for i := range next {
			if next[i] < next[n] {
				n = i
			}
		}
		t := next[n]
		if t >= end {
			break
		}
		// The executor learns of the loss from a gang on the node: one running now, else the
		// next one launched there (a replacement still starting); with none left in the stage
		// the node is lost idle, for the next stage to find. With a notice it learns at once.
		running, wake := false, math.Inf(1)
		for _, j := range onNode[n] {
			for _, i := range slots[j] {
				if b := began(i); t < b {
					wake = min(wake, b)
					break
				}
				if t < finish[i] {
					running = true
					break
				}
			}
		}
		notice := m.Spot.Notice
		if !running {
			switch {
			case notice > 0 && math.IsInf(wake, 1):
				// Noticed idle: released now, billed no more to the SYNC (unless its gangs moved
				// away already: gone since then).
				if n < idleBits {
					out.idle |= 1 << n
				}
				if math.IsNaN(l.goneAt[n]) {
					l.goneAt[n] = t // released: no gang moves there
				}
				next[n] = math.Inf(1)
			case notice > 0 && l.chains == nil:
				// Noticed before its next gang: replaced now, the gang waiting only for what is
				// left of the replacement's latency.
				scale := m.Scale.Sample(r)
				ready := t + scale + m.Init.Sample(r) + m.DataLatency
				held := 0.0 // how long past the notice it bills: until a gang training on through another node's notice stops
				for _, j := range onNode[n] {
					for c, i := range slots[j] {
						if b := began(i); t < b {
							if d := &l.doomed[i]; l.doomedGen[i] == l.gen && t < d.stop {
								// The gang's launch still trains here, through another node's notice:
								// it trains on until this replacement is up too (or a node goes).
								goes := min(d.goes, t+notice)
								stop, from, doneFirst := trainThrough(d.base, d.it, d.orig, max(d.room, ready), goes, m.Spot.Restart)
								done, added := d.orig, -d.added // done on the doomed nodes
								if doneFirst {
									l.relaunched[i] = 0 // its launch is the one cut, done after all
								} else {
									relaunch := max(stop, d.room, ready)
									done = relaunch + l.startup[i] + d.orig - from
									added = stop - d.stop - (from - d.from)
									l.began[i] = relaunch
									d.from = from
								}
								latency[i] += added
								d.added += added
								out.gpuSeconds += float64(g.Nodes[i].GPUs) * added
								shift := done - finish[i] // the later ones begin as it ends: shift alike
								shrunk = shrunk || shift < 0
								for _, k := range slots[j][c:] {
									finish[k] += shift
									end = max(end, finish[k])
								}
								out.unbilled -= float64(d.noticed) * (stop - d.stop) // its nodes noticed before bill until it stops too
								d.room, d.goes, d.stop = max(d.room, ready), goes, stop
								d.noticed++
								held = max(held, stop-t)
							} else if shift := ready - b; shift > 0 {
								for _, k := range slots[j][c:] {
									finish[k] += shift
									end = max(end, finish[k])
								}
								l.began[i], l.startup[i], l.relaunched[i] = ready, startup(i), l.gen
							}
							break
						}
					}
				}
				out.count++
				out.unbilled += scale - held
				end, waits = max(end, ready), max(waits, ready)
				next[n] = t + scale + m.Spot.UntilInterrupted(r)
			default:
				if math.IsInf(wake, 1) && n < idleBits {
					out.idle |= 1 << n
				}
				next[n] = wake
			}
			continue
		}
		// The replacement's latency, drawn when a gang first waits for it (an unhedged stage
		// always draws it first, as it did before hedging).
		scale, replace, replaced := 0.0, 0.0, false
		if l.chains == nil {
			scale = m.Scale.Sample(r)
			replace, replaced = scale+m.Init.Sample(r)+m.DataLatency, true
		}
		held := 0.0 // how long past the notice the doomed node bills: until its gangs stopped
		for _, j := range onNode[n] {
			for c, i := range slots[j] {
				b := began(i)
				if t < b || t >= finish[i] {
					continue
				}
				// The gang trains on through the notice until its room is there (free on-demand
				// room at once, else the replacement) or the node goes; then it relaunches: it
				// starts up again and trains what is left, all of the launch's work with Restart
				// (the checkpoint is the one it began from; it trains to the node's end, in case
				// it gets done), else what it had not done since its last checkpoint (a start-up
				// cut short is done again whole).
				to, wait := j, 0.0
				if od := freeSlot(t); od >= 0 {
					to = od
				} else {
					if !replaced {
						scale = m.Scale.Sample(r)
						replace, replaced = scale+m.Init.Sample(r)+m.DataLatency, true
					}
					wait = replace
				}
				// The gang stops at its first checkpoint (an iteration's end) once its room is
				// there, if that comes before the node goes; else the node takes it, and the
				// iteration under way is lost. A node found lost at the stage's start is gone.
				goes := t
				if notice > 0 && n != foundLost {
					goes = t + notice
				}
				b, su := began(i), startup(i)
				it := l.iterTime(g, i, latency[i]-su)
				stopAt, from, done := trainThrough(b+su, it, finish[i], t+wait, goes, m.Spot.Restart)
				held = max(held, stopAt-t)
				if done {
					// Done on the doomed node: the slot's later trials go on where it goes.
					if later := slots[j][c+1:]; len(later) > 0 {
						if to != j {
							slots[to] = append(slots[to], later...)
							slots[j] = slots[j][:c+1]
						} else if shift := t + wait - finish[i]; shift > 0 {
							for _, k := range later {
								finish[k] += shift
								end = max(end, finish[k])
							}
						}
					}
					break
				}
				s := m.LaunchSample(r)
				left := finish[i] - from // what it had not done since its last checkpoint
				relaunch := max(stopAt, t+wait)
				shift := relaunch + s + left - finish[i]
				added := s + left - (finish[i] - stopAt) // launch time: what per-function billing charges
				latency[i] += added
				out.gpuSeconds += float64(g.Nodes[i].GPUs) * added
				for _, k := range slots[j][c:] { // the later ones begin as they end: shift alike
					finish[k] += shift
					end = max(end, finish[k])
				}
				l.began[i], l.startup[i], l.relaunched[i] = relaunch, s, l.gen
				l.doomed[i], l.doomedGen[i] = doomedLaunch{base: b + su, it: it, orig: finish[i] - shift, room: t + wait, goes: goes, stop: stopAt, from: from, added: added, noticed: 1}, l.gen
				if to != j { // the gang and the slot's later trials move to the on-demand slot
					slots[to] = append(slots[to], slots[j][c:]...)
					slots[j] = slots[j][:c]
				}
				break
			}
		}
		if !replaced {
			// Every gang it ran moved (or got done on it): the node is not replaced, nor billed
			// from the moment its gangs stopped (found lost then). Taken again then, it is found
			// lost by the next gang launched there, or lost idle.
			out.moved++
			l.goneAt[n] = t + held
			next[n] = t + held // looked at again once its gangs left it
			continue
		}
		if !math.IsNaN(l.goneAt[n]) { // gone since then, replaced now
			out.unbilled += t - l.goneAt[n]
			l.goneAt[n] = math.NaN()
		}
		out.count++
		out.unbilled += scale - held
		// The stage waits for the replacement asked for, even when the gangs it was for got
		// done on the doomed node (the executor's stage ends once its requests are answered).
		end, waits = max(end, t+replace), max(waits, t+replace)
		if n == foundLost {
			foundLost = -1
		}
		// The replacement can be interrupted from the end of its SCALE on: before it is ready,
		// its first gang finds it lost.
		next[n] = t + scale + m.Spot.UntilInterrupted(r)
	}
	if shrunk {
		end = max(waits, lastTrain()+afterTrain)
	}
	for _, at := range l.goneAt { // gone until the SYNC
		if !math.IsNaN(at) && end > at {
			out.unbilled += end - at
		}
	}
	return end, out
}

// lostWithin draws whether any of n nodes is interrupted within w seconds of its start: a node
// lost before the stage it waits for starts.
func (sp *Spot) lostWithin(r *rand.Rand, n int, w float64) bool {
	if n <= 0 || w <= 0 {
		return false
	}
	if sp.Lifetimes == nil {
		return r.ExpFloat64() < float64(n)*sp.Rate*w
	}
	for range n {
		if sp.Lifetimes.Sample(r) < w {
			return true
		}
	}
	return false
}
