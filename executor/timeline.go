package executor

import (
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/sim"
)

// RealizedSchedule lays a journal's launches out on the nodes they ran on, in the shape of the
// simulator's sampled schedule (sim.Schedule) so that a planned and a realized Gantt chart are
// drawn alike: a TRAIN span from each launch to the trial's next result (done or fail), on every
// node the launch used, on the first free GPUs of the node (the journal keeps nodes, not GPU
// indices); a provisioning span from the start of the stage a node came up in to the node's first
// launch; the syncs as stage ends. Rows are nodes in the order the journal first names them.
// Times are spec seconds from the run's start (wall seconds divided by timeScale). A span's Trial
// numbers the run's trials in the order of their first launch, across brackets.
func RealizedSchedule(events []Event, timeScale float64, gpusPerNode int) sim.Schedule {
	var start time.Time
	rows := map[string]int{}
	row := func(id string) int {
		if r, ok := rows[id]; ok {
			return r
		}
		rows[id] = len(rows)
		return rows[id]
	}
	sec := func(t time.Time) float64 { return t.Sub(start).Seconds() / timeScale }
	type provision struct {
		from           time.Time
		bracket, stage int
	}
	type open struct {
		at             time.Time
		bracket, stage int
		nodes          []string
		lanes          [][2]int // first GPU and GPU count on each node
	}
	stageStart := map[[2]int]time.Time{}
	lastStage := map[int]int{}
	pending := map[string]provision{} // node -> when its stage began, until its first launch
	busy := map[string][]bool{}       // node -> GPUs in use
	launched := map[string]open{}
	trialNo := map[string]int{}
	sc := sim.Schedule{GPUsPerNode: gpusPerNode}
	for _, e := range events {
		switch e.Ev {
		case EvStart:
			start = e.At
		case EvStage:
			if _, ok := stageStart[[2]int{e.Bracket, e.Stage}]; !ok {
				stageStart[[2]int{e.Bracket, e.Stage}] = e.At
			}
			lastStage[e.Bracket] = e.Stage
		case EvNodeUp:
			row(e.Node.ID)
			k := lastStage[e.Bracket]
			pending[e.Node.ID] = provision{from: stageStart[[2]int{e.Bracket, k}], bracket: e.Bracket, stage: k}
			busy[e.Node.ID] = make([]bool, nodeGPUs(e.Node, gpusPerNode))
		case EvLaunch:
			if _, ok := trialNo[e.Trial]; !ok {
				trialNo[e.Trial] = len(trialNo)
			}
			o := open{at: e.At, bracket: e.Bracket, stage: e.Stage, nodes: e.Nodes}
			per := max(1, e.GPUs/max(len(e.Nodes), 1))
			for _, n := range e.Nodes {
				if p, ok := pending[n]; ok {
					sc.Spans = append(sc.Spans, sim.Span{Row: row(n), Start: sec(p.from), End: sec(e.At), GPUs: len(busy[n]), NodeGPUs: otherSize(len(busy[n]), gpusPerNode), Provision: true,
						Bracket: p.bracket, Stage: p.stage})
					delete(pending, n)
				}
				o.lanes = append(o.lanes, [2]int{takeLanes(busy[n], per), per})
			}
			launched[e.Trial] = o
		case EvDone, EvFail:
			o, ok := launched[e.Trial]
			if !ok {
				continue
			}
			for i, n := range o.nodes {
				l := o.lanes[i]
				sc.Spans = append(sc.Spans, sim.Span{Row: row(n), Start: sec(o.at), End: sec(e.At), GPU: l[0], GPUs: l[1], NodeGPUs: otherSize(len(busy[n]), gpusPerNode),
					Bracket: o.bracket, Stage: o.stage, Trial: trialNo[e.Trial]})
				for g := l[0]; g < l[0]+l[1] && g < len(busy[n]); g++ {
					busy[n][g] = false
				}
			}
			delete(launched, e.Trial)
		case EvSync:
			sc.StageEnds = append(sc.StageEnds, sec(e.At))
		}
	}
	sc.Rows = len(rows)
	return sc
}

// nodeGPUs is a node's GPUs: its own (nodes of several instance types differ), or the spec's for a
// node journaled without them.
func nodeGPUs(n *cloud.Node, spec int) int {
	if n != nil && n.GPUs > 0 {
		return n.GPUs
	}
	return spec
}

// otherSize is a node's GPUs when they are not the spec's (a node of another instance type), else
// 0: a span's NodeGPUs.
func otherSize(gpus, spec int) int {
	if gpus == spec {
		return 0
	}
	return gpus
}

// takeLanes takes the first k free GPUs of a node and returns the first (0 when none are free or
// the node is not known).
func takeLanes(gpus []bool, k int) int {
	for i := 0; i+k <= len(gpus); i++ {
		free := true
		for g := i; g < i+k; g++ {
			free = free && !gpus[g]
		}
		if free {
			for g := i; g < i+k; g++ {
				gpus[g] = true
			}
			return i
		}
	}
	return 0
}
