package runstate

import (
	"cmp"
	"slices"
	"time"

	"github.com/rubberband-hpo/rubberband/sim"
)

// RealizedSchedule lays a run's launches (its snapshot's records) out on the nodes they ran on,
// in the shape of the simulator's sampled schedule (sim.Schedule) so that a planned and a
// realized Gantt chart are drawn alike: a TRAIN span per launch on every node it used, on the
// first free GPUs of the node when it started (the journal keeps nodes, not GPU indices); a
// provisioning span from the start of the stage a node came up in to the node's first launch;
// the syncs as stage ends. A launch still running ends at now (left out when now is zero). Rows
// are nodes in the order they came up (then as launches first name them). Times are spec
// seconds from the run's start (wall seconds divided by timeScale). A span's Trial numbers the
// run's trials in the order of their first launch, across brackets.
func RealizedSchedule(s *Snapshot, now time.Time, timeScale float64, gpusPerNode int) sim.Schedule {
	sec := func(t time.Time) float64 { return t.Sub(s.Start).Seconds() / timeScale }
	rows := map[string]int{}
	row := func(id string) int {
		if r, ok := rows[id]; ok {
			return r
		}
		rows[id] = len(rows)
		return rows[id]
	}
	gpus := map[string]int{} // node -> its GPUs
	stageStart := map[[2]int]time.Time{}
	for _, w := range s.Stages {
		stageStart[[2]int{w.Bracket, w.Stage}] = w.Start
	}
	sc := sim.Schedule{GPUsPerNode: gpusPerNode}
	firstUse := map[string]time.Time{}
	for _, n := range s.Nodes {
		row(n.Node.ID)
		gpus[n.Node.ID] = gpusPerNode
		if n.Node.GPUs > 0 {
			gpus[n.Node.ID] = n.Node.GPUs
		}
	}
	// Launches take GPU lanes at their start and free them at their end, in time order (an end
	// before a start at the same moment: the stage loop journals a result before what it frees
	// is launched again).
	type edge struct {
		at     time.Time
		start  bool
		launch int
	}
	var edges []edge
	trialNo := map[string]int{}
	for i, l := range s.Launches {
		if _, ok := trialNo[l.Trial]; !ok {
			trialNo[l.Trial] = len(trialNo)
		}
		end := l.End
		if l.Outcome == LaunchRunning {
			if now.IsZero() {
				continue
			}
			end = now
		}
		if !end.After(l.Start) {
			continue // took no time (a launch that failed at once, in virtual time): nothing to draw
		}
		edges = append(edges, edge{l.Start, true, i}, edge{end, false, i})
		for _, n := range l.Nodes {
			row(n)
			if _, ok := firstUse[n]; !ok || l.Start.Before(firstUse[n]) {
				firstUse[n] = l.Start
			}
		}
	}
	slices.SortStableFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.start != b.start {
			return map[bool]int{false: -1, true: 1}[a.start]
		}
		return cmp.Compare(a.launch, b.launch)
	})
	busy := map[string][]bool{}
	lanes := map[int][][2]int{} // launch -> first GPU and count, per node
	for _, e := range edges {
		l := s.Launches[e.launch]
		per := max(1, l.GPUs/max(len(l.Nodes), 1))
		if e.start {
			for _, n := range l.Nodes {
				if busy[n] == nil {
					busy[n] = make([]bool, max(gpus[n], gpusPerNode))
				}
				lanes[e.launch] = append(lanes[e.launch], [2]int{takeLanes(busy[n], per), per})
			}
			continue
		}
		for i, n := range l.Nodes {
			ln := lanes[e.launch][i]
			sc.Spans = append(sc.Spans, sim.Span{Row: row(n), Start: sec(l.Start), End: sec(e.at), GPU: ln[0], GPUs: ln[1],
				NodeGPUs: otherSize(len(busy[n]), gpusPerNode), Bracket: l.Bracket, Stage: l.Stage, Trial: trialNo[l.Trial]})
			for g := ln[0]; g < ln[0]+ln[1] && g < len(busy[n]); g++ {
				busy[n][g] = false
			}
		}
	}
	var provisions []sim.Span
	for _, n := range s.Nodes {
		first, used := firstUse[n.Node.ID]
		from, ok := stageStart[[2]int{n.Bracket, n.Stage}]
		if !ok && !n.Node.RunningAt.IsZero() { // an ASHA run's node: it has no stage to start with
			from, ok = n.Node.RunningAt, true
		}
		if !used || !ok {
			continue
		}
		provisions = append(provisions, sim.Span{Row: row(n.Node.ID), Start: sec(from), End: sec(first), GPUs: gpus[n.Node.ID],
			NodeGPUs: otherSize(gpus[n.Node.ID], gpusPerNode), Provision: true, Bracket: n.Bracket, Stage: n.Stage})
	}
	sc.Spans = append(provisions, sc.Spans...)
	for _, w := range s.Stages {
		if !w.End.IsZero() {
			sc.StageEnds = append(sc.StageEnds, sec(w.End))
		}
	}
	slices.Sort(sc.StageEnds)
	sc.Rows = len(rows)
	return sc
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
