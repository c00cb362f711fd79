package runstate

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// Snapshot is a run as its journal says at one moment, read-only: the one fold of the journal
// (State.Apply) that every reader derives from — status and the dashboard (Phase, Cause), the
// metrics (Counts, held nodes, open launches), the realized schedule (the launch and node
// records). A reader never folds events itself, and never reads a reason's words.
type Snapshot struct {
	RunID string
	Start time.Time
	Phase Phase
	// Why says in words why the run is cancelled or stopped; Cause says it as a word.
	Why   string
	Cause journal.StopCause
	// Detail is what Why says beyond its Cause: a stop's words are its cause, ": ", then the
	// detail (a pause's fault, a budget stop's forecast), so that no reader cuts words apart.
	Detail string
	// Launches are every launch so far, in journal order; a launch under way has no End.
	Launches []LaunchRecord
	// Nodes are every node the run held, in the order they came up; a node held now has no End.
	Nodes []NodeRecord
	// Stages are every stage begun, per bracket in order; a stage not synced yet has no End.
	Stages []StageWindow
	// Current is each bracket's stage under way (its last begun).
	Current []int
	Counts  Counts
}

// Phase is where a run stands by its journal alone (whether a driver is alive is the lock's to
// say: a run Running whose driver is gone died without a word).
type Phase string

// Phases.
const (
	PhaseNew       Phase = "not started"
	PhaseRunning   Phase = "running"
	PhaseFinished  Phase = "finished"
	PhaseCancelled Phase = "cancelled"
	PhaseStopped   Phase = "stopped" // its last driver stopped short of the end: Cause says why
)

// LaunchRecord is one launch of a trial's gang: where, when, and how it ended.
type LaunchRecord struct {
	Bracket, Stage int
	Trial          string
	Try, GPUs      int
	Nodes          []string
	Start          time.Time
	End            time.Time     // while it runs: zero
	Outcome        LaunchOutcome // while it runs: LaunchRunning
}

// LaunchOutcome is how a launch ended.
type LaunchOutcome string

// Outcomes.
const (
	LaunchRunning     LaunchOutcome = ""
	LaunchDone        LaunchOutcome = "done"
	LaunchFailed      LaunchOutcome = "failed"      // a retry follows, unless it gave up
	LaunchGaveUp      LaunchOutcome = "gave up"     // its last retry failed
	LaunchInterrupted LaunchOutcome = "interrupted" // it lost its node: relaunched, not a retry
	LaunchOrphaned    LaunchOutcome = "orphaned"    // its driver died; the next one ended it
)

// NodeRecord is one node the run held: from when it came up (Up: its node_up, billed from the
// node's RunningAt) to End, and why it went.
type NodeRecord struct {
	Bracket int
	Stage   int // the stage its bracket was in when it came up
	Node    cloud.Node
	Up      time.Time
	End     time.Time         // while held: zero
	Cause   journal.NodeCause // while held: empty
	// Draining: interrupted and no longer used, it bills until it is released.
	Draining bool
}

// StageWindow is one stage of a bracket: from its start to its sync.
type StageWindow struct {
	Bracket, Stage int
	GPUs           int
	Start, End     time.Time
}

// Counts are what happened so far, for the metrics.
type Counts struct {
	Done             int // trial-stages that reached their target
	Retries          int // failed tries that were relaunched
	GaveUp           int // trial-stages given up on
	Timeouts         int // launches stopped past their budget
	NodesLost        int // nodes that went away under the run (lost, interrupted)
	Interruptions    int // of them, interruptions (a notice, or a spot node taken)
	InterruptedTries int // tries that lost their node (relaunched, not retries)
}

// Open are the launches under way.
func (s *Snapshot) Open() []LaunchRecord {
	var out []LaunchRecord
	for _, l := range s.Launches {
		if l.Outcome == LaunchRunning {
			out = append(out, l)
		}
	}
	return out
}

// Held are the nodes held now, draining ones included.
func (s *Snapshot) Held() []NodeRecord {
	var out []NodeRecord
	for _, n := range s.Nodes {
		if n.Cause == "" {
			out = append(out, n)
		}
	}
	return out
}

// closeLaunch ends trial's launch under way, if one is, at at as how.
func (s *State) closeLaunch(trial string, at time.Time, how LaunchOutcome) {
	if i, ok := s.OpenLaunch[trial]; ok {
		l := &s.LaunchLog[i]
		s.tallyOf(StageKey{l.Bracket, l.Stage}).running--
		s.LaunchLog[i].End, s.LaunchLog[i].Outcome = at, how
		if t, ok := s.Trials[trial]; ok {
			t.cost += s.launchCost(l.GPUs, l.Nodes, l.Start, at)
		}
		delete(s.OpenLaunch, trial)
	}
}

// endNodes ends the records of nodes ids held now at at for cause; draining ones are only marked
// (they bill on until released).
func (s *State) endNodes(ids []string, at time.Time, cause journal.NodeCause, draining bool) {
	for _, id := range ids {
		i, ok := s.nodeAt[id]
		if !ok || s.nodeLog[i].Cause != "" {
			continue
		}
		rec := &s.nodeLog[i]
		if draining {
			rec.Draining = true
			continue
		}
		rec.End, rec.Cause = at, cause
		if rec.Draining && cause == journal.NodeReleased { // the run's end let go of a node it drained
			rec.Cause = journal.NodeDrained
		}
	}
}

// Snapshot copies the state's view out; the caller holds whatever guards s.
func (s *State) Snapshot() *Snapshot {
	snap := &Snapshot{RunID: s.RunID, Start: s.Start, Counts: s.counts,
		Launches: slices.Clone(s.LaunchLog), Nodes: slices.Clone(s.nodeLog), Current: slices.Clone(s.current)}
	for i := range snap.Launches {
		snap.Launches[i].Nodes = slices.Clone(snap.Launches[i].Nodes)
	}
	switch {
	case s.Start.IsZero():
		snap.Phase = PhaseNew
	case s.Finished:
		snap.Phase = PhaseFinished
	case s.Cancelled != "":
		snap.Phase, snap.Why = PhaseCancelled, s.Cancelled
	case s.stopped != "":
		snap.Phase, snap.Why, snap.Cause = PhaseStopped, s.stopped, s.stopCause
		snap.Detail = strings.TrimPrefix(s.stopped, string(s.stopCause)+": ")
	default:
		snap.Phase = PhaseRunning
	}
	for b, br := range s.Brackets {
		for k := range br.Stages {
			w, ok := s.StageAt[StageKey{b, k}]
			if !ok || w.Start.IsZero() {
				continue
			}
			snap.Stages = append(snap.Stages, StageWindow{Bracket: b, Stage: k, GPUs: s.Plan[b][k].GPUs, Start: w.Start, End: w.end})
		}
	}
	return snap
}

// fold is the state a journal's events leave a run of p in; what the fold notices and skips is
// discarded.
func fold(p Plan, events []journal.Event) (*State, error) {
	s, err := New(p, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	for _, e := range events {
		s.Apply(e)
	}
	return s, nil
}

// Replay describes a run of p from its journal's events alone, as of now (the end of the stage
// under way, of a launch still running): what `status` shows.
func Replay(p Plan, events []journal.Event, now time.Time) (*Result, error) {
	s, err := fold(p, events)
	if err != nil {
		return nil, err
	}
	if s.Start.IsZero() {
		return nil, fmt.Errorf("replay: the journal holds no run")
	}
	return s.Result(now), nil
}

// Fold replays a journal as Replay does, and returns its snapshot.
func Fold(p Plan, events []journal.Event) (*Snapshot, error) {
	s, err := fold(p, events)
	if err != nil {
		return nil, err
	}
	return s.Snapshot(), nil
}

// Inspect replays a journal once and returns both what it realized as of now (Replay's result,
// nil for a journal that holds no run yet) and its snapshot.
func Inspect(p Plan, events []journal.Event, now time.Time) (*Result, *Snapshot, error) {
	s, err := fold(p, events)
	if err != nil {
		return nil, nil, err
	}
	snap := s.Snapshot()
	if s.Start.IsZero() {
		return nil, snap, nil
	}
	return s.Result(now), snap, nil
}
