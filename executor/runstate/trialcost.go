package runstate

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/search"
)

// launchCost is what a launch of gpus GPUs on nodes, from start to end, costs its trial: on a
// cluster billed per function, its GPUs' price for that time (the meter's rule); otherwise its
// share of each node's own price, its GPUs over the node's, spread evenly over its nodes as
// placement packs a gang. A node's idle time and start-up are the run's, not a trial's: the
// trials' costs add up to less than the run's bill.
func (s *State) launchCost(gpus int, nodes []string, start, end time.Time) float64 {
	secs := max(s.sec(end)-s.sec(start), 0)
	if s.Model.Rules.PerFunction {
		return float64(gpus) * secs * s.Model.GPUPricePerSecond()
	}
	if len(nodes) == 0 {
		return 0
	}
	perNode := float64(gpus) / float64(len(nodes))
	total := 0.0
	for _, id := range nodes {
		price, size := s.Model.NodePricePerSecond, s.exp.Cluster.GPUsPerNode
		if i, ok := s.nodeAt[id]; ok {
			n := s.nodeLog[i].Node
			price = s.nodePrice(n)
			if n.GPUs > 0 {
				size = n.GPUs
			}
		}
		total += perNode / float64(max(size, 1)) * price * secs
	}
	return total
}

// TrialCost is the dollars trial's launches have cost so far, its launch under way up to now
// included (launchCost): the cost_usd a spec may rank or constrain by.
func (s *State) TrialCost(trial string, now time.Time) float64 {
	t, ok := s.Trials[trial]
	if !ok {
		return 0
	}
	cost := t.cost
	if i, open := s.OpenLaunch[trial]; open {
		l := s.LaunchLog[i]
		cost += s.launchCost(l.GPUs, l.Nodes, l.Start, now)
	}
	return cost
}

// notePoint keeps a multi-objective spec's result of trial t at stage k: its losses and
// constraint violation (search.Losses) from the metrics its result was journaled with (cost_usd
// among them when the spec asks for it: the driver adds the meter's figure, TrialCost, as it
// journals the result, so that a replay ranks by the same dollars).
func (s *State) notePoint(t *trialRun, k int, metrics map[string]float64) {
	if !s.exp.MultiObjective() {
		return
	}
	losses, violation := search.Losses(s.exp, metrics)
	if t.points == nil {
		t.points = map[int]Scored{}
	}
	kept := map[string]float64{}
	for _, name := range s.exp.Metrics() {
		if v, ok := metrics[name]; ok {
			kept[name] = v
		}
	}
	t.points[k] = Scored{Point: pareto.Point{Losses: losses, Violation: violation}, Metrics: kept}
}

// Scored is a result of a multi-objective spec: its point, and the metrics it was scored from
// (the spec's objectives and constrained metrics).
type Scored struct {
	Point   pareto.Point
	Metrics map[string]float64
}

// PointOf is trial's result at stage k for a multi-objective spec, and whether it has one.
func (s *State) PointOf(trial string, k int) (pareto.Point, bool) {
	t, ok := s.Trials[trial]
	if !ok {
		return pareto.Point{}, false
	}
	p, ok := t.points[k]
	return p.Point, ok
}

// orderPoints orders results of a multi-objective spec (trial, stage) by pareto.Order, ties by
// the order given. A result not kept (none of a trial that never reported) ranks as infeasible.
func (s *State) orderPoints(results []TrialStage) []TrialStage {
	points := make([]pareto.Point, len(results))
	for i, r := range results {
		p, ok := s.Trials[r.Trial].points[r.Stage]
		if !ok {
			p.Point.Violation = math.Inf(1)
		}
		points[i] = p.Point
	}
	out := make([]TrialStage, 0, len(results))
	for _, i := range pareto.Order(points) {
		out = append(out, results[i])
	}
	return out
}

// Pareto is a multi-objective run's Pareto front so far: among the results at the highest
// iteration any result reached (max_iters once a bracket has finished: results of fewer
// iterations are not comparable with them), the feasible ones no other feasible one dominates,
// in promotion's order (pareto.Order). Empty when none is feasible.
func (s *State) Pareto() []ParetoTrial {
	top := 0
	var results []TrialStage
	for _, id := range slices.Sorted(maps.Keys(s.Trials)) {
		t := s.Trials[id]
		k := -1
		for stage := range t.points {
			k = max(k, stage)
		}
		if k < 0 {
			continue
		}
		switch iter := s.Brackets[t.bracket].Stages[k].EndIter(); {
		case iter > top:
			top, results = iter, results[:0]
			fallthrough
		case iter == top:
			results = append(results, TrialStage{Trial: id, Stage: k})
		}
	}
	var feasible []TrialStage
	var losses [][]float64
	for _, r := range results {
		if p := s.Trials[r.Trial].points[r.Stage].Point; p.Violation == 0 {
			feasible = append(feasible, r)
			losses = append(losses, p.Losses)
		}
	}
	front := make([]TrialStage, 0, len(feasible))
	for _, i := range pareto.Front(losses) {
		front = append(front, feasible[i])
	}
	var out []ParetoTrial
	for _, r := range s.orderPoints(front) {
		t := s.Trials[r.Trial]
		out = append(out, ParetoTrial{Trial: t.id, Params: t.Params, Iter: s.Brackets[t.bracket].Stages[r.Stage].EndIter(),
			Metrics: maps.Clone(t.points[r.Stage].Metrics)})
	}
	return out
}
