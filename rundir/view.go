package rundir

import (
	"errors"
	"io/fs"
	"math"
	"path/filepath"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
)

// View is a run as list, status and the dashboard show it: its state directory's journal
// replayed.
type View struct {
	State  *State
	Res    *runstate.Result // nil until the journal holds the run's start
	Snap   *runstate.Snapshot
	Events []journal.Event
	Live   bool // a driver holds the run's lock
}

// NewView reads the run's journal and replays it.
func NewView(st *State) (*View, error) {
	_, live, err := ReadHolder(st.Dir)
	if err != nil {
		return nil, err
	}
	events, err := journal.ReadJournal(filepath.Join(st.Dir, Journal))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return ViewOf(st, events, live, nil)
}

// ViewOf replays events already read (the dashboard follows the journal itself). A run no
// driver holds is measured up to its last event, so its elapsed time and cost stop growing once
// it stopped; a live one up to now's time (the wall clock's when nil).
func ViewOf(st *State, events []journal.Event, live bool, now clock.Clock) (*View, error) {
	v := &View{State: st, Events: events, Live: live}
	if len(events) == 0 {
		return v, nil
	}
	at := events[len(events)-1].At
	if live {
		at = clock.Or(now).Now()
	}
	var err error
	if v.Res, v.Snap, err = runstate.Inspect(st.RunPlan(), events, at); err != nil {
		return nil, err
	}
	return v, nil
}

// Status is one word for where a run is, with why when it stopped short.
func (v *View) Status() (word, why string) {
	switch {
	case v.Live && v.Res == nil:
		return "starting", ""
	case v.Live:
		return "running", ""
	case v.Res == nil && cancelled(v.Events):
		// Cancelled before any driver started it (a server's run cancelled as its driver
		// came up): it is over, not waiting to start.
		return "cancelled", "before it started"
	case v.Res == nil:
		return "not started", ""
	}
	switch s := v.Snap; {
	case s.Phase == runstate.PhaseCancelled:
		return "cancelled", s.Why
	case s.Phase == runstate.PhaseFinished:
		if by, missed := runstate.MissedDeadline(v.Res); missed { // its result stands: finished, and said
			return "finished", "DEADLINE MISSED by " + format.Clock(by)
		}
		return "finished", ""
	case s.Phase == runstate.PhaseStopped && s.Cause == journal.StopInterrupted:
		return "interrupted", ""
	case s.Phase == runstate.PhaseStopped && s.Cause == journal.StopPaused: // an infrastructure fault: resume carries on once it is mended
		return "paused", s.Detail
	case s.Phase == runstate.PhaseStopped && s.Cause == journal.StopBudget: // budget.stop: not a failure, resume carries on
		return "over budget", s.Detail
	case s.Phase == runstate.PhaseStopped:
		return "failed", s.Why
	default:
		return "interrupted", "its driver died" // no stop journaled: killed, or its machine went down
	}
}

// cancelled says whether the journal holds a cancel.
func cancelled(events []journal.Event) bool {
	for _, e := range events {
		if e.Ev == journal.EvCancel {
			return true
		}
	}
	return false
}

// Stages is how many stages have synced, of how many; for ASHA, how many rungs hold a result.
func (v *View) Stages() (synced, total int) {
	for _, b := range v.State.Exp.Algorithm.Brackets() {
		total += len(b.Stages)
	}
	if v.State.Exp.Algorithm.ASHA != nil { // rungs overlap and never sync: those holding a result
		if v.Res != nil {
			for _, b := range v.Res.Brackets {
				for _, st := range b.Stages {
					if st.Done > 0 {
						synced++
					}
				}
			}
		}
		return min(synced, total), total
	}
	for _, e := range v.Events {
		if e.Ev == journal.EvSync {
			synced++
		}
	}
	return min(synced, total), total
}

// Best is the chosen trial's metric once the run finished, else the best reported so far.
func (v *View) Best() (trialID string, metric float64, ok bool) {
	if v.Res == nil {
		return "", 0, false
	}
	if v.Res.Best != nil {
		return v.Res.Best.Trial, v.Res.Best.Metric, true
	}
	name, max := v.State.Exp.Objective.Metric, v.State.Exp.Objective.Mode == "max"
	for _, t := range v.Res.Trials {
		m, has := t.Metrics[name]
		if !has || math.IsNaN(m) {
			continue
		}
		if !ok || (max && m > metric) || (!max && m < metric) {
			trialID, metric, ok = t.ID, m, true
		}
	}
	return trialID, metric, ok
}

// Summary is one row of `list` (and of the dashboard's runs page).
type Summary struct {
	Name      string    `json:"name"`
	RunID     string    `json:"run_id"`
	Dir       string    `json:"dir"`
	Backend   string    `json:"backend"`
	Status    string    `json:"status"`
	Why       string    `json:"why,omitempty"`
	Stages    int       `json:"stages_synced"`
	Of        int       `json:"stages"`
	Started   time.Time `json:"started,omitzero"`
	ElapsedS  float64   `json:"elapsed_s"`
	CostUSD   float64   `json:"cost_usd"`
	Metric    string    `json:"metric"`
	Best      *float64  `json:"best,omitempty"`
	BestTrial string    `json:"best_trial,omitempty"`
	// DeadlineMissed is a finished run that ended past its deadline, by MissedByS.
	DeadlineMissed bool    `json:"deadline_missed,omitempty"`
	MissedByS      float64 `json:"missed_by_s,omitempty"`
}

// Summary sums the run up in one row.
func (v *View) Summary() Summary {
	st := v.State
	s := Summary{Name: filepath.Base(st.Dir), RunID: st.Run.RunID, Dir: st.Dir, Backend: st.Run.Backend, Metric: st.Exp.Objective.Metric}
	s.Status, s.Why = v.Status()
	s.Stages, s.Of = v.Stages()
	if len(v.Events) > 0 {
		s.Started = v.Events[0].At
	}
	if v.Res != nil {
		s.ElapsedS, s.CostUSD = v.Res.Realized.JCT, v.Res.Realized.Cost
		s.MissedByS, s.DeadlineMissed = runstate.MissedDeadline(v.Res)
	}
	if id, m, ok := v.Best(); ok {
		s.Best, s.BestTrial = &m, id
	}
	return s
}
