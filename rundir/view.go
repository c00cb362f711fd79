package rundir

import (
	"fmt"
	"io"
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
	State *State
	Res   *runstate.Result // nil until the journal holds the run's start
	Snap  *runstate.Snapshot
	// Events are the journal's events when the view was made of them (ViewOf); NewView folds
	// the journal as it reads it and keeps none (AllEvents reads them).
	Events []journal.Event
	Live   bool // a driver holds the run's lock
	seen   journalSeen
}

// journalSeen is what the views read off the journal besides its fold.
type journalSeen struct {
	events  int
	started time.Time // the first event's time
	last    time.Time // the last event's
	syncs   int
	cancel  bool // a cancel is journaled
}

func (j *journalSeen) note(e journal.Event) {
	if j.events == 0 {
		j.started = e.At
	}
	j.events++
	j.last = e.At
	switch e.Ev {
	case journal.EvSync:
		j.syncs++
	case journal.EvCancel:
		j.cancel = true
	}
}

// NewView reads the run's journal and replays it as it reads it: a 100,000-trial run's million
// events are folded without being kept (journal.Scan).
func NewView(st *State) (*View, error) {
	_, live, err := ReadHolder(st.Dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(st.Dir, Journal)
	if f := snapshotFold(st, path); f != nil {
		// From the driver's snapshot at its last sync, the records after it alone: a live
		// 100,000-trial run's status without folding its million records. Used when records
		// follow it (their last one says when the run stands) and the journal still begins with
		// what it folded; otherwise the journal is folded whole.
		tail := 0
		after, err := journal.ScanAfter(path, f.mark, func(e journal.Event) { f.Apply(e); tail++ })
		if err != nil {
			return nil, err
		}
		if after && tail > 0 {
			return f.View(live, nil), nil
		}
	}
	f, err := NewFold(st)
	if err != nil {
		return nil, err
	}
	if err := journal.Scan(path, func(e journal.Event) { f.Apply(e) }); err != nil {
		return nil, err
	}
	return f.View(live, nil), nil
}

// snapshotFold is the fold the snapshot beside the journal at path holds (runstate.Snapshot-
// Path: the driver's, at its last sync), or nil when there is none it can use.
func snapshotFold(st *State, path string) *Fold {
	s, m, err := runstate.LoadSnapshot(runstate.SnapshotPath(path), st.RunPlan(), io.Discard)
	if err != nil || m.Records == 0 {
		return nil
	}
	// What the views read off the journal beside the fold, as of the snapshot: the records it
	// folded (note counts on from there), the run's start, its syncs and a cancel.
	seen := journalSeen{events: m.Records, started: s.Start, syncs: s.SyncedStages(), cancel: s.Cancelled != ""}
	return &Fold{st: st, s: s, seen: seen, mark: m}
}

// AllEvents are the run's events: the view's, or its journal's read again when the view kept
// none.
func (v *View) AllEvents() ([]journal.Event, error) {
	if v.Events != nil || v.seen.events == 0 {
		return v.Events, nil
	}
	return journal.ReadJournal(filepath.Join(v.State.Dir, Journal))
}

// ViewOf replays events already read (the dashboard follows the journal itself). A run no
// driver holds is measured up to its last event, so its elapsed time and cost stop growing once
// it stopped; a live one up to now's time (the wall clock's when nil).
func ViewOf(st *State, events []journal.Event, live bool, now clock.Clock) (*View, error) {
	f, err := NewFold(st)
	if err != nil {
		return nil, err
	}
	f.Apply(events...)
	v := f.View(live, now)
	v.Events = events
	return v, nil
}

// Fold is a run's journal folded as it is read: a reader that follows the journal (the
// dashboard) applies what was appended since, not the whole journal again.
type Fold struct {
	st   *State
	s    *runstate.State
	seen journalSeen
	mark journal.Mark // the journal prefix a snapshot folded, for a fold begun from one
}

// NewFold is the fold of st's run before any event.
func NewFold(st *State) (*Fold, error) {
	s, err := runstate.New(st.RunPlan(), io.Discard)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return &Fold{st: st, s: s}, nil
}

// Apply folds the events that follow those already applied.
func (f *Fold) Apply(events ...journal.Event) {
	for _, e := range events {
		f.s.Apply(e)
		f.seen.note(e)
	}
}

// View is the run as the events applied so far say (as ViewOf says, without Events).
func (f *Fold) View(live bool, now clock.Clock) *View {
	v := &View{State: f.st, Live: live, seen: f.seen}
	v.inspect(f.s, now)
	return v
}

// inspect takes the views of the fold s of the view's journal (runstate.Inspect's): a run no
// driver holds as of its last event, a live one as of now.
func (v *View) inspect(s *runstate.State, now clock.Clock) {
	if v.seen.events == 0 {
		return
	}
	at := v.seen.last
	if v.Live {
		at = clock.Or(now).Now()
	}
	v.Snap = s.Snapshot()
	if !s.Start.IsZero() {
		v.Res = s.Result(at)
	}
}

// Status is one word for where a run is, with why when it stopped short.
func (v *View) Status() (word, why string) {
	switch {
	case v.Live && v.Res == nil:
		return "starting", ""
	case v.Live:
		return "running", ""
	case v.Res == nil && v.seen.cancel:
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
	return min(v.seen.syncs, total), total
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
	s.Started = v.seen.started
	if v.Res != nil {
		s.ElapsedS, s.CostUSD = v.Res.Realized.JCT, v.Res.Realized.Cost
		s.MissedByS, s.DeadlineMissed = runstate.MissedDeadline(v.Res)
	}
	if id, m, ok := v.Best(); ok {
		s.Best, s.BestTrial = &m, id
	}
	return s
}

// Spent is what the run has cost up to at as the events applied so far say (Bill(at).Total);
// false before the run's start.
func (f *Fold) Spent(at time.Time) (float64, bool) {
	if f.s.Start.IsZero() {
		return 0, false
	}
	return f.s.Spent(at), true
}

// result is the run's result as of now (runstate's Result), nil before its start.
func (f *Fold) result(now time.Time) *runstate.Result {
	if f.s.Start.IsZero() {
		return nil
	}
	return f.s.Result(now)
}
