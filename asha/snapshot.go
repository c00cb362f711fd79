package asha

import (
	"maps"

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
	Rank       int
	Ranked     bool
}

// SavedResult is one result at a rung.
type SavedResult struct {
	Loss         float64
	Order, Trial int
}

// Save is the ladder's state.
func (l *Ladder) Save() Saved {
	s := Saved{Started: l.started, InFlight: maps.Clone(l.inFlight), Reported: l.reported, Levels: make([][]SavedRung, len(l.levels))}
	for b, rs := range l.levels {
		s.Levels[b] = make([]SavedRung, len(rs))
		for k, r := range rs {
			s.Levels[b][k] = SavedRung{N: r.n, Unpromoted: saveResults(r.unpromoted), Promoted: saveResults(r.promoted), Rank: r.rank, Ranked: r.ranked}
		}
	}
	return s
}

// Restore is the ladder of cfg in the state s (Save's); false when s has not cfg's brackets and
// rungs (a snapshot of another spec).
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
			l.levels[b][k] = rung{n: r.N, unpromoted: restoreResults(r.Unpromoted), promoted: restoreResults(r.Promoted), rank: r.Rank, ranked: r.Ranked}
		}
	}
	l.started, l.reported = s.Started, s.Reported
	if s.InFlight != nil {
		l.inFlight = s.InFlight
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
