package sim

import (
	"math"
	"math/rand/v2"
)

// Spot models spot interruptions (cluster.market spot). Each node is interrupted as a Poisson
// process of Rate per second, or, with Lifetimes, after a lifetime drawn afresh when the node
// (or its replacement) starts its part of a stage. An interrupted node is replaced: a new
// SCALE, INIT_INSTANCE and DATA; the gangs it ran restart on the replacement (a start-up again)
// and lose nothing when the trainer checkpoints within the notice, or, with Restart, the
// launch's work so far. Interruptions of a node whose gangs of the stage have all ended delay
// nothing and are not modelled.
type Spot struct {
	Rate      float64 // interruptions per node-second; 0 when Lifetimes is set
	Lifetimes Dist    // a node's time to its interruption; nil when Rate is used
	Restart   bool    // an interrupted launch loses its work (no checkpoint within the notice)
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
	count    int     // interruptions that hit a running gang
	unbilled float64 // node-seconds not billed: each replacement's SCALE, between the end of
	// the interrupted instance and the start of the new one
	calm       float64 // the stage's end had nothing been interrupted
	gpuSeconds float64 // TRAIN GPU-seconds the relaunches add (what per-function billing charges)
}

// spotLayout is what interrupt needs of a stage's DAG that no sample changes (the TRAIN nodes
// of each slot, the slots on each node), with buffers it reuses from sample to sample.
type spotLayout struct {
	slots, onNode        [][]int
	began, startup, next []float64
}

func (m *Offer) newSpotLayout(g *DAG, nodes, gpt int) *spotLayout {
	l := &spotLayout{onNode: make([][]int, nodes), began: make([]float64, len(g.Nodes)), startup: make([]float64, len(g.Nodes)), next: make([]float64, nodes)}
	for i, n := range g.Nodes {
		if n.Kind != Train {
			continue
		}
		for len(l.slots) <= n.Slot {
			l.slots = append(l.slots, nil)
		}
		l.slots[n.Slot] = append(l.slots[n.Slot], i)
	}
	for j := range l.slots {
		first, last := m.slotNodes(j, gpt, nodes)
		for n := first; n <= last; n++ {
			l.onNode[n] = append(l.onNode[n], j)
		}
	}
	return l
}

// interrupt lays spot interruptions over one sample of a stage's TRAIN nodes (g as addTrain
// built it, finish and latency as CriticalPath drew them), in place: a gang hit at time t ends
// later by the replacement's latency, a new start-up and, with Restart, the work it had done
// since it began; the gangs after it on its slot move with it. A slot's gang runs on the nodes
// that hold its GPUs (GPU x on node x / GPUsPerNode, as placement packs them). It returns the
// stage's new end (its SYNC) and what the interruptions cost.
func (m *Offer) interrupt(l *spotLayout, g *DAG, r *rand.Rand, finish, latency []float64) (float64, interruptions) {
	slots, onNode := l.slots, l.onNode
	end := 0.0
	for _, chain := range slots {
		for _, i := range chain {
			end = max(end, finish[i])
		}
	}
	// Each TRAIN node's current launch: when it began, and its start-up with the run path's
	// overhead (the model's mean for a first launch, whose draw is inside its latency; a
	// relaunch's own draw).
	began, startup := l.began, l.startup
	launch, _ := m.Launch()
	for _, chain := range slots {
		for _, i := range chain {
			began[i], startup[i] = finish[i]-latency[i], min(launch, latency[i])
		}
	}
	next := l.next
	for n := range next {
		next[n] = m.Spot.UntilInterrupted(r)
	}
	out := interruptions{calm: end}
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
		scale := m.Scale.Sample(r)
		replace := scale + m.Init.Sample(r) + m.DataLatency
		hit := false
		for _, j := range onNode[n] {
			for c, i := range slots[j] {
				if t < began[i] || t >= finish[i] {
					continue
				}
				// The relaunch starts up again, then trains what is left: all of the launch's
				// work with Restart (the checkpoint is the one it began from), else what it had
				// not done (a start-up cut short is done again whole).
				s := m.LaunchSample(r)
				trained := max(0, t-began[i]-startup[i])
				left := finish[i] - max(t, began[i]+startup[i])
				if m.Spot.Restart {
					left += trained
				}
				shift := t + replace + s + left - finish[i]
				added := s + left - (finish[i] - t) // launch time: what per-function billing charges
				latency[i] += added
				out.gpuSeconds += float64(g.Nodes[i].GPUs) * added
				for _, k := range slots[j][c:] {
					finish[k] += shift
					began[k] += shift
					end = max(end, finish[k])
				}
				began[i], startup[i] = t+replace, s
				hit = true
				break
			}
		}
		if hit {
			out.count++
			out.unbilled += scale
		}
		next[n] = t + replace + m.Spot.UntilInterrupted(r)
	}
	return end, out
}
