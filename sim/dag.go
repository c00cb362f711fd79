package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Kind is the type of a DAG node (paper §4.2).
type Kind uint8

const (
	// Scale provisions new instances from the provider; it blocks the stage.
	Scale Kind = iota
	// InitInstance prepares one new instance (dependencies, joining the cluster).
	InitInstance
	// Data downloads the dataset onto one new instance.
	Data
	// Train runs one trial for the stage's iterations (startup, then iterations).
	Train
	// Sync is the barrier that ends a stage: rank, promote, release.
	Sync
	// FirstStageLag holds a job's first stage back once, before its TRAIN nodes: its first wave
	// of launches starting all at once on fresh nodes (profile.first_stage_lag; only when set).
	FirstStageLag
)

var kindNames = [...]string{"SCALE", "INIT_INSTANCE", "DATA", "TRAIN", "SYNC", "FIRST_STAGE_LAG"}

func (k Kind) String() string { return kindNames[k] }

// MarshalText names the kind in JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Node is one task of the DAG. Nodes are stored in topological order: predecessors first.
type Node struct {
	Kind    Kind `json:"kind"`
	Bracket int  `json:"bracket"`
	Stage   int  `json:"stage"`
	Trial   int  `json:"trial"` // TRAIN: the trial's index in its stage; -1 otherwise
	Slot    int  `json:"slot"`  // TRAIN: the GPU slot or gang it runs on; INIT/DATA: the new node
	GPUs    int  `json:"gpus"`  // TRAIN: GPUs of the trial
	Iters   int  `json:"iters"` // TRAIN: iterations to run
	// Queue is, for a TRAIN node of a stage's first wave, how many of the wave's launches start
	// before it: it starts Queue times the offer's Contention late.
	Queue int `json:"queue,omitempty"`
	// Offer is the index in Model.Offers of the instance type and market the node runs on.
	Offer int   `json:"offer,omitempty"`
	Preds []int `json:"preds"`
}

// DAG is a job's (or a stage's) task graph.
type DAG struct {
	Nodes []Node `json:"nodes"`
}

func (g *DAG) add(n Node) int {
	g.Nodes = append(g.Nodes, n)
	return len(g.Nodes) - 1
}

// addProvision adds the SCALE node and one INIT_INSTANCE (and DATA) per new node of offer o
// after preds, and returns the nodes the stage's TRAIN nodes wait for.
func (g *DAG) addProvision(m *Model, o, b, k, newNodes int, preds []int) []int {
	scale := g.add(Node{Kind: Scale, Bracket: b, Stage: k, Trial: -1, Offer: o, Preds: preds})
	ready := make([]int, 0, newNodes)
	for i := range newNodes {
		last := g.add(Node{Kind: InitInstance, Bracket: b, Stage: k, Trial: -1, Slot: i, Offer: o, Preds: []int{scale}})
		if m.Offers[o].DataLatency > 0 || m.DataCost > 0 {
			last = g.add(Node{Kind: Data, Bracket: b, Stage: k, Trial: -1, Slot: i, Offer: o, Preds: []int{last}})
		}
		ready = append(ready, last)
	}
	return ready
}

// addTrain adds the stage's TRAIN nodes, on offer o, after preds (and after a FIRST_STAGE_LAG
// node when lag) and the SYNC that ends the stage. With fewer GPUs than trials, trials queue on
// single-GPU slots: slot j runs trials j, j+a, j+2a, ... in a serial chain. It returns the SYNC
// node.
func (g *DAG) addTrain(o, b, k int, s spec.Stage, a StageAlloc, preds []int, lag bool) int {
	if lag {
		preds = []int{g.add(Node{Kind: FirstStageLag, Bracket: b, Stage: k, Trial: -1, Offer: o, Preds: preds})}
	}
	gpt := GPUsPerTrial(s, a)
	slots := min(a.GPUs, s.Trials)
	var last []int
	for t := range s.Trials {
		p, queue := preds, t
		if t >= slots {
			p, queue = []int{last[t-slots]}, 0 // launched alone, as a slot frees
		}
		last = append(last, g.add(Node{Kind: Train, Bracket: b, Stage: k, Trial: t, Slot: t % slots, GPUs: gpt, Iters: s.Iters, Queue: queue, Offer: o, Preds: p}))
	}
	return g.add(Node{Kind: Sync, Bracket: b, Stage: k, Trial: -1, Preds: last[max(0, len(last)-slots):]})
}

// BuildDAG builds the whole job's DAG for an allocation: per bracket, per stage, a SCALE node
// and INIT_INSTANCE/DATA nodes when the stage needs more nodes than are up (all of its nodes
// when it changes type or market), a FIRST_STAGE_LAG for the job's first stages when the
// profile has one, its TRAIN nodes and a SYNC. Brackets are independent chains
// that run at the same time, but for Hyperband's rounds: a bracket of round r starts after the
// last SYNC of every bracket of round r-1.
func BuildDAG(m *Model, brackets []spec.Bracket, a Alloc) (*DAG, error) {
	if err := m.Check(brackets, a); err != nil {
		return nil, fmt.Errorf("build dag: %w", err)
	}
	g := &DAG{}
	// The last SYNC of each round's brackets: a bracket of the next round starts after all of them.
	roundEnds := map[int][]int{}
	for b, br := range brackets {
		var preds []int
		if br.Round > 0 {
			preds = slices.Clone(roundEnds[br.Round-1])
		}
		var prev *StageAlloc
		for k, s := range br.Stages {
			_, o := m.offerOf(a[b][k])
			if n := m.NewNodes(prev, a[b][k]); n > 0 { // nodes of another offer go at the previous SYNC
				preds = g.addProvision(m, o, b, k, n, preds)
			}
			prev = &a[b][k]
			preds = []int{g.addTrain(o, b, k, s, a[b][k], preds, m.Offers[o].lags(br, k))}
		}
		roundEnds[br.Round] = append(roundEnds[br.Round], preds...)
	}
	return g, nil
}

// Latency draws the latency of one node, on its offer.
func (m *Model) Latency(n *Node, r *rand.Rand) float64 { return m.Offers[n.Offer].latency(n, r) }

func (m *Offer) latency(n *Node, r *rand.Rand) float64 {
	switch n.Kind {
	case Scale:
		return m.Scale.Sample(r)
	case InitInstance:
		return m.Init.Sample(r)
	case Data:
		return m.DataLatency
	case Train:
		return m.LaunchSample(r) + m.Contention.At(n.GPUs)*float64(n.Queue) + SampleSum(m.IterLatency(n.GPUs), n.Iters, r)
	case FirstStageLag:
		return m.FirstLag.Sample(r)
	default:
		return 0
	}
}

// CriticalPath is the paper's Algorithm 1 for one sample: draw every node's latency in
// topological order, finish(v) = latency(v) + max over predecessors of finish, and return the
// latest finish. finish, when long enough, receives every node's finish time; latency likewise.
func (g *DAG) CriticalPath(m *Model, r *rand.Rand, finish, latency []float64) float64 {
	if len(finish) < len(g.Nodes) {
		finish = make([]float64, len(g.Nodes))
	}
	if len(latency) < len(g.Nodes) {
		latency = make([]float64, len(g.Nodes))
	}
	for i := range g.Nodes {
		latency[i] = m.Latency(&g.Nodes[i], r)
	}
	return g.finishAll(finish, latency)
}

// finishAll sets every node's finish from the latencies, in topological order, and returns the
// latest.
func (g *DAG) finishAll(finish, latency []float64) float64 {
	end := 0.0
	for i := range g.Nodes {
		start := 0.0
		for _, p := range g.Nodes[i].Preds {
			start = max(start, finish[p])
		}
		finish[i] = start + latency[i]
		end = max(end, finish[i])
	}
	return end
}
