package server

import (
	"cmp"
	"slices"
	"time"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// Schedule decides which queued runs start now: per team, the queued runs in priority order
// (higher first, then the earlier submission) start while the team's running runs and those
// started before them fit its max_gpus and max_nodes. The queue is strict: a run that does not
// fit holds back the team's runs behind it, so that a wide run is never starved by narrow ones.
// A run wider than its team's quotas can never start; Admit refuses it before it is queued.
//
// It also predicts when each run left waiting starts: running runs end at their start plus their
// predicted completion time (now, if that has passed), and the queue is played forward in order.
func Schedule(teams map[string]store.Team, running, queued []store.Run, now time.Time) (start []string, predicted map[string]time.Time) {
	predicted = map[string]time.Time{}
	byTeam := map[string][]store.Run{}
	for _, r := range queued {
		byTeam[r.Team] = append(byTeam[r.Team], r)
	}
	type holding struct {
		gpus, nodes int
		until       time.Time
	}
	held := map[string][]holding{}
	for _, r := range running {
		end := r.StartedAt.Add(seconds(r.PredictedJCTSeconds))
		if end.Before(now) {
			end = now
		}
		held[r.Team] = append(held[r.Team], holding{r.GPUs, r.Nodes, end})
	}
	for _, name := range sortedKeys(byTeam) {
		team, runs := teams[name], byTeam[name]
		slices.SortStableFunc(runs, queueOrder)
		hs := held[name]
		fits := func(r store.Run, hs []holding, at time.Time) bool {
			gpus, nodes := r.GPUs, r.Nodes
			for _, h := range hs {
				if h.until.After(at) {
					gpus, nodes = gpus+h.gpus, nodes+h.nodes
				}
			}
			return (team.MaxGPUs == 0 || gpus <= team.MaxGPUs) && (team.MaxNodes == 0 || nodes <= team.MaxNodes)
		}
		at, waiting := now, false
		for _, r := range runs {
			// The earliest moment from at on, over the ends of what is held, at which r fits.
			when, ok := at, fits(r, hs, at)
			if !ok {
				ends := make([]time.Time, 0, len(hs))
				for _, h := range hs {
					if h.until.After(at) {
						ends = append(ends, h.until)
					}
				}
				slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
				for _, e := range ends {
					if fits(r, hs, e) {
						when, ok = e, true
						break
					}
				}
			}
			if !ok {
				break // wider than the team's quotas: nothing behind it is predicted either
			}
			if !waiting && when.Equal(now) {
				start = append(start, r.ID)
			} else {
				waiting = true
				predicted[r.ID] = when
			}
			at = when
			hs = append(hs, holding{r.GPUs, r.Nodes, when.Add(seconds(r.PredictedJCTSeconds))})
		}
	}
	return start, predicted
}

// queueOrder is the queue's order: priority, higher first, then submission, then ID.
func queueOrder(a, b store.Run) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
