package server

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// Verdict is what the queue says of a team's queued runs now.
type Verdict struct {
	// Start are the runs that start now, in queue order.
	Start []string
	// Refuse are the runs that can never start, with why: wider than the team's quotas, or
	// reserving more than is left of its month's budget once its running runs' charges are in
	// (quotas and budgets lowered after they were admitted).
	Refuse map[string]string
	// Wait are the runs that wait for the budget, with why: they fit what is left of the month
	// but not beside what the running runs reserve.
	Wait map[string]string
	// Predicted is when each run left waiting for the quotas is predicted to start.
	Predicted map[string]time.Time
}

// Schedule decides, on a team's ledger, which of its queued runs start now: in priority order
// (higher first, then the earlier submission) while they fit the team's max_gpus and max_nodes
// beside its running runs and those started before them, and their reservations fit what is
// left of its budget. The queue is strict: a run that does not fit holds back the team's runs
// behind it, so that a wide run is never starved by narrow ones. A run that can never fit
// (Verdict.Refuse) does not hold the queue: it leaves it.
//
// A running run holds its GPUs and nodes until it ends, however long past its prediction. For
// the predicted starts, running runs end at their start plus their predicted completion time
// (any moment after now, if that has passed), and the queue is played forward in order.
func Schedule(l store.Ledger, now time.Time) Verdict {
	v := Verdict{Refuse: map[string]string{}, Wait: map[string]string{}, Predicted: map[string]time.Time{}}
	team := l.Team
	type holding struct {
		gpus, nodes int
		until       time.Time
	}
	var (
		hs     []holding
		queued []store.Run
	)
	budgeted := team.MonthlyBudgetUSD > 0
	remaining := team.MonthlyBudgetUSD - l.Spent // less the running runs' reservations, below
	for _, r := range l.Active {
		switch r.State {
		case store.Paused:
			// Its nodes went at the pause, but it may be resumed: it keeps its reservation.
			remaining -= Reservation(r)
		case store.Running:
			remaining -= Reservation(r)
			end := r.StartedAt.Add(seconds(r.PredictedJCTSeconds))
			if !end.After(now) {
				end = now.Add(time.Nanosecond) // overdue: it ends at any moment, not before now
			}
			hs = append(hs, holding{r.GPUs, r.Nodes, end})
		case store.Queued:
			queued = append(queued, r)
		}
	}
	slices.SortStableFunc(queued, queueOrder)
	fits := func(r store.Run, hs []holding, at time.Time) bool {
		gpus, nodes := r.GPUs, r.Nodes
		for _, h := range hs {
			if h.until.After(at) {
				gpus, nodes = gpus+h.gpus, nodes+h.nodes
			}
		}
		return fitsQuotas(team, gpus, nodes)
	}
	at, waiting, predicting := now, false, true
	for _, r := range queued {
		if !fitsQuotas(team, r.GPUs, r.Nodes) {
			v.Refuse[r.ID] = fmt.Sprintf("refused while queued: its plan holds up to %d GPUs on %d nodes; team %s may now hold %s GPUs and %s nodes at once",
				r.GPUs, r.Nodes, team.Name, limit(team.MaxGPUs), limit(team.MaxNodes))
			continue
		}
		need := Reservation(r)
		if budgeted && need > team.MonthlyBudgetUSD-l.Spent {
			v.Refuse[r.ID] = fmt.Sprintf("refused while queued: its predicted cost %s is over what is left of team %s's budget this month, %s",
				format.Money(need), team.Name, format.Money(max(team.MonthlyBudgetUSD-l.Spent, 0)))
			continue
		}
		if budgeted && need > remaining {
			if !waiting {
				v.Wait[r.ID] = fmt.Sprintf("waits for the budget: its predicted cost %s is over what team %s's running runs leave of this month's, %s",
					format.Money(need), team.Name, format.Money(max(remaining, 0)))
			}
			waiting, predicting = true, false // when running runs release their reservations is not known
			continue
		}
		remaining -= need
		if !predicting {
			continue
		}
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
		if !waiting && ok && when.Equal(now) {
			v.Start = append(v.Start, r.ID)
		} else {
			waiting = true
			v.Predicted[r.ID] = when
		}
		at = when
		hs = append(hs, holding{r.GPUs, r.Nodes, when.Add(seconds(r.PredictedJCTSeconds))})
	}
	return v
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
