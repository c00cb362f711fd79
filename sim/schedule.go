package sim

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Span is one bar of a cluster schedule: a node row busy from Start to End (seconds).
type Span struct {
	Row        int
	Start, End float64
	// GPU and GPUs are the first GPU and the number of GPUs held on the row's node; NodeGPUs is
	// that node's GPUs when its instance type is not the default's, else 0.
	GPU, GPUs, NodeGPUs int
	Provision           bool // SCALE and INIT_INSTANCE (and DATA) of a new node; else a trial's TRAIN
	Bracket             int
	Stage               int
	Trial               int
}

// Schedule is one sampled run of a plan laid out on nodes, for a Gantt chart.
type Schedule struct {
	Rows int
	// GPUsPerNode is the default type's; a span's NodeGPUs, when set, is its node's.
	GPUsPerNode int
	Spans       []Span
	StageEnds   []float64
	TrainDAG    int // TRAIN nodes in the DAG: every one has at least one span
	// Rungs says that the schedule is an ASHA job's: a span's Stage is its rung, and StageEnds
	// are the starts of the plan's phases.
	Rungs bool
}

// Schedule samples the plan's whole DAG once (seeded) and places every TRAIN node on the node
// rows its GPUs occupy: trial t with g GPUs per trial holds GPUs t*g..t*g+g-1 of its bracket's
// cluster, a trial waiting in a wave takes its slot's GPU. Brackets get rows of their own.
func (s *Simulator) Schedule(a Alloc) (Schedule, error) {
	m := s.m
	g, err := BuildDAG(m, s.brackets, a)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule: %w", err)
	}
	finish, latency := make([]float64, len(g.Nodes)), make([]float64, len(g.Nodes))
	g.CriticalPath(m, spec.NewRand(s.seed, 0x5c4ed), finish, latency)
	sc := Schedule{GPUsPerNode: m.GPUsPerNode}
	offset := make([]int, len(a))
	for b := range a {
		offset[b] = sc.Rows
		sc.Rows += a.PeakNodesOf(b)
	}
	up := make([]int, len(a))
	upOffer := make([]int, len(a))
	stageOf := map[[2]int]int{} // (bracket, stage) -> nodes up before its provisioning
	for i, n := range g.Nodes {
		start := finish[i] - latency[i]
		gpn := m.Offers[n.Offer].GPUsPerNode
		nodeGPUs := 0
		if gpn != m.GPUsPerNode {
			nodeGPUs = gpn
		}
		switch n.Kind {
		case Scale:
			if n.Offer != upOffer[n.Bracket] { // another type or market: the nodes up went at the SYNC
				up[n.Bracket] = 0
			}
			stageOf[[2]int{n.Bracket, n.Stage}] = up[n.Bracket]
		case InitInstance, Data:
			row := offset[n.Bracket] + stageOf[[2]int{n.Bracket, n.Stage}] + n.Slot
			if n.Kind == InitInstance { // the span runs from the SCALE's start: the node is being rented
				start = finish[n.Preds[0]] - latency[n.Preds[0]]
			}
			sc.Spans = append(sc.Spans, Span{Row: row, Start: start, End: finish[i], GPUs: gpn, NodeGPUs: nodeGPUs, Provision: true, Bracket: n.Bracket, Stage: n.Stage})
		case Train:
			sc.TrainDAG++
			gpt := n.GPUs
			first := n.Slot * gpt
			if gpt == 1 {
				first = n.Slot
			}
			for gpu := first; gpu < first+gpt; gpu += gpn {
				sc.Spans = append(sc.Spans, Span{Row: offset[n.Bracket] + gpu/gpn, Start: start, End: finish[i],
					GPU: gpu % gpn, GPUs: min(gpt, gpn), NodeGPUs: nodeGPUs, Bracket: n.Bracket, Stage: n.Stage, Trial: n.Trial})
				if gpt < gpn {
					break
				}
			}
		case Sync:
			sc.StageEnds = append(sc.StageEnds, finish[i])
			up[n.Bracket], upOffer[n.Bracket] = a[n.Bracket][n.Stage].Nodes, n.Offer
		}
	}
	return sc, nil
}

// PeakNodesOf is the most nodes bracket b holds in any stage.
func (a Alloc) PeakNodesOf(b int) int {
	peak := 0
	for _, s := range a[b] {
		peak = max(peak, s.Nodes)
	}
	return peak
}
