package runstate

import (
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// The counts a progress line and a stage's decisions read are kept by Apply as events come,
// rather than walked out of every trial, launch or node at each event: a driver's cost per
// event must not grow with the job (at 10^4 trials a walk per event made a run quadratic).

// tally is what one stage of a bracket counts: launches under way, trials that gave up, and the
// iterations its trials reported in it (each counted to the stage's target at most).
type tally struct{ running, failed, iters int }

func (s *State) tallyOf(key StageKey) *tally {
	t := s.tallies[key]
	if t == nil {
		t = &tally{}
		s.tallies[key] = t
	}
	return t
}

// Underway is how many of bracket b's trials train in its stage k now, and the iterations its
// trials reported in that stage so far (each counted to the stage's target at most).
func (s *State) Underway(b, k int) (running, iters int) {
	t := s.tallies[StageKey{b, k}]
	if t == nil {
		return 0, 0
	}
	return t.running, t.iters
}

// FailedIn is how many of bracket b's trials gave up in its stage k.
func (s *State) FailedIn(b, k int) int {
	if t := s.tallies[StageKey{b, k}]; t != nil {
		return t.failed
	}
	return 0
}

// ItersReported is the iterations every trial reported so far, all stages together.
func (s *State) ItersReported() int { return s.itersAll }

// NodesGen is bracket b's node generation: it changes whenever the nodes the bracket holds (or
// drains) change, so that a reader may keep what it made of them until it does.
func (s *State) NodesGen(b int) uint64 { return s.nodesGen[b] }

// HeldNode is node id, when bracket b holds it now (draining ones aside).
func (s *State) HeldNode(b int, id string) (cloud.Node, bool) {
	h, ok := s.heldBy[id]
	if !ok || h.bracket != b {
		return cloud.Node{}, false
	}
	return h.node, true
}

type heldNode struct {
	bracket int
	node    cloud.Node
}

// setIter moves trial t to iteration iter, keeping its stages' iteration counts.
func (s *State) setIter(t *trialRun, iter int) {
	if iter == t.Iter {
		return
	}
	s.itersAll += iter - t.Iter
	for k, st := range s.Brackets[t.bracket].Stages {
		was, now := stageIters(t.Iter, st.StartIter, st.Iters), stageIters(iter, st.StartIter, st.Iters)
		if was != now {
			s.tallyOf(StageKey{t.bracket, k}).iters += now - was
		}
	}
	t.Iter = iter
}

// stageIters is what a trial at iteration iter did of a stage of n iterations from start.
func stageIters(iter, start, n int) int {
	return min(max(iter-start, 0), n)
}

// Spent is what the run has cost by now: Bill(now).Total, kept as nodes and launches end so
// that it costs a walk over the nodes held, not over everything the run ever held.
func (s *State) Spent(now time.Time) float64 {
	if s.Start.IsZero() {
		return 0
	}
	total := s.spentClosed
	for b := range s.Nodes {
		for _, list := range [][]cloud.Node{s.Nodes[b], s.Draining[b]} {
			for _, n := range list {
				total += s.nodeCharge(n, max(s.sec(now), s.sec(n.RunningAt)))
			}
		}
	}
	return total
}

// sec is t in spec seconds since the run's start.
func (s *State) sec(t time.Time) float64 { return t.Sub(s.Start).Seconds() / s.timeScale }

// nodePrice is a node's own price per second; the spec's for nodes journaled before nodes
// carried one.
func (s *State) nodePrice(n cloud.Node) float64 {
	if n.PricePerHour > 0 {
		return n.PricePerHour / 3600
	}
	return s.Model.NodePricePerSecond
}

// nodeCharge is what node n costs from its start to releasedAt (spec seconds), its dataset
// included: the meter's rule (meter.Bill).
func (s *State) nodeCharge(n cloud.Node, releasedAt float64) float64 {
	r := s.Model.Rules
	if r.PerFunction {
		return r.DataCost
	}
	return r.DataCost + r.Charge(releasedAt-s.sec(n.RunningAt), s.nodePrice(n))
}

// launchCharge is what a launch costs when the cluster bills per function (meter.Bill).
func (s *State) launchCharge(l launchSpan) float64 {
	r := s.Model.Rules
	if !r.PerFunction {
		return 0
	}
	return float64(l.gpus) * r.Charge(s.sec(l.end)-s.sec(l.start), s.Model.GPUPricePerSecond())
}

// noteResult counts trial t's end of stage k (done or given up), once, before it is marked.
func (s *State) noteResult(t *trialRun, k int) {
	if _, done := t.Done[k]; done || t.Failed[k] || t.Params == nil {
		return
	}
	s.results++
}

// Drawn is how many trials have a configuration (drawn at sampling, or at an adaptive sampler's
// first launch).
func (s *State) Drawn() int { return s.drawn }

// Results is how many trial-stages of trials with a configuration ended, done or given up: the
// observations an adaptive sampler learns from.
func (s *State) Results() int { return s.results }

// IndexOf is trial id's index in the run (an ASHA run's: in its ladder), and whether the run has
// it.
func (s *State) IndexOf(id string) (int, bool) {
	t := s.Trials[id]
	if t == nil {
		return 0, false
	}
	if a := s.ASHA; a != nil {
		return a.Index[id], true
	}
	return s.TrialIndex(t.bracket, t.pos), true
}

// SyncedStages is how many stages synced.
func (s *State) SyncedStages() int { return len(s.Synced) }
