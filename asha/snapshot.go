package asha

import (
	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Saved is a Ladder's promotion state in exported fields, for a snapshot of a run (gob): what
// Restore makes the same Ladder of, so that a driver resuming from it decides as one that
// replayed the whole journal would. The rungs are not saved: they follow from the spec.
type Saved struct {
	Levels   [][]SavedRung
	Started  int
	InFlight map[int]Job
	Reported int
}

// SavedRung is one rung's state: its results in the order the Ladder keeps them (the heap's).
type SavedRung struct {
	N          int
	Unpromoted []SavedResult
	Promoted   []SavedResult
	// PromotedBlocks are the lengths of the blocks Promoted is kept in (absent in a snapshot
	// from before it was: Restore then blocks them anew), so that the restored ladder is laid
	// out as the saved one was.
	PromotedBlocks []int
	Rank           int
	Ranked         bool
	// Points are a multi-objective rung's results (Ladder.ReportPoint), in the order reported.
	Points []SavedPoint
}

// SavedPoint is one result of a multi-objective rung.
type SavedPoint struct {
	Order, Trial int
	Losses       []float64
	Violation    float64
}

// SavedResult is one result at a rung.
type SavedResult struct {
	Loss         float64
	Order, Trial int
}

// Save is the ladder's state.
func (l *Ladder) Save() Saved {
	s := Saved{Started: l.started, InFlight: map[int]Job{}, Reported: l.reported, Levels: make([][]SavedRung, len(l.levels))}
	for _, j := range l.Jobs() {
		s.InFlight[j.Trial] = j
	}
	for b, rs := range l.levels {
		s.Levels[b] = make([]SavedRung, len(rs))
		for k, r := range rs {
			var promoted []SavedResult // nil when none, as a rung that never promoted had
			var blocks []int
			if r.promoted.len() > 0 {
				promoted = saveResults(r.promoted.all())
				for _, b := range r.promoted.blocks {
					blocks = append(blocks, len(b))
				}
			}
			s.Levels[b][k] = SavedRung{N: r.n, Unpromoted: saveResults(r.unpromoted), Promoted: promoted, PromotedBlocks: blocks, Rank: r.rank, Ranked: r.ranked}
			for _, p := range r.points {
				s.Levels[b][k].Points = append(s.Levels[b][k].Points, SavedPoint{p.order, p.trial, p.point.Losses, p.point.Violation})
			}
		}
	}
	return s
}

// Restore is the ladder of cfg in the state s (Save's); false when s has not cfg's brackets and
// rungs or trials (a snapshot of another spec).
func Restore(cfg spec.ASHA, s Saved) (*Ladder, bool) {
	l := New(cfg)
	if len(s.Levels) != len(l.levels) {
		return nil, false
	}
	for b := range l.levels {
		if len(s.Levels[b]) != len(l.levels[b]) {
			return nil, false
		}
		for k, r := range s.Levels[b] {
			lv := rung{n: r.N, unpromoted: restoreResults(r.Unpromoted), rank: r.Rank, ranked: r.Ranked}
			for _, p := range r.Points {
				lv.points = append(lv.points, scoredPoint{p.Order, p.Trial, pareto.Point{Losses: p.Losses, Violation: p.Violation}})
			}
			promoted := restoreResults(r.Promoted)
			if !lv.promoted.restore(promoted, r.PromotedBlocks) {
				for _, p := range promoted {
					lv.promoted.insert(p)
				}
			}
			l.levels[b][k] = lv
		}
	}
	l.started, l.reported = s.Started, s.Reported
	l.inFlight.grow(s.Started)
	for t, j := range s.InFlight {
		if t != j.Trial || t < 0 || t >= cfg.Trials {
			return nil, false
		}
		l.inFlight.set(j)
	}
	return l, true
}

func saveResults(rs []result) []SavedResult {
	if rs == nil {
		return nil
	}
	out := make([]SavedResult, len(rs))
	for i, r := range rs {
		out[i] = SavedResult{Loss: r.loss, Order: r.order, Trial: r.trial}
	}
	return out
}

func restoreResults(rs []SavedResult) []result {
	if rs == nil {
		return nil
	}
	out := make([]result, len(rs))
	for i, r := range rs {
		out[i] = result{loss: r.Loss, order: r.Order, trial: r.Trial}
	}
	return out
}
