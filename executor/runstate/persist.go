package runstate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// A snapshot is a State written beside its journal at a sync, so that a driver resuming a large
// run decodes and folds only the records after it instead of the whole journal. It names the
// journal prefix it folds (journal.Mark: bytes, records, CRC-32C), and is used only when the
// journal still begins with that prefix and it was written for the same plan by this format:
// otherwise the journal is replayed whole, for the journal is the truth.
//
// The file is the magic line (snapMagic), the CRC-32C of the rest (4 bytes, big-endian), then the gob of a
// savedSnapshot.

// snapVersion is the snapshot format's version, raised whenever what a field of the State means
// changes; a change of the fields themselves changes the snapshot's schema print.
const snapVersion = 1

// snapMagic is the line a snapshot file opens with: the format's version and a print of its
// schema (every field's name and type), so that a snapshot a binary with other fields wrote is
// told apart before it is decoded (a gob would leave a field it lacks at zero, silently).
func snapMagic() string {
	h := sha256.New()
	schemaPrint(h, reflect.TypeFor[savedSnapshot](), map[reflect.Type]bool{})
	return fmt.Sprintf("rubberband state snapshot %d %x\n", snapVersion, h.Sum(nil)[:8])
}

// schemaPrint writes t's shape to w: its kind, and its fields', elements' and keys' shapes.
func schemaPrint(w io.Writer, t reflect.Type, seen map[reflect.Type]bool) {
	fmt.Fprintf(w, "%s:%s(", t.String(), t.Kind())
	if !seen[t] {
		seen[t] = true
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				fmt.Fprintf(w, "%s ", t.Field(i).Name)
				schemaPrint(w, t.Field(i).Type, seen)
			}
		case reflect.Map:
			schemaPrint(w, t.Key(), seen)
			schemaPrint(w, t.Elem(), seen)
		case reflect.Slice, reflect.Array, reflect.Pointer:
			schemaPrint(w, t.Elem(), seen)
		}
	}
	fmt.Fprint(w, ")")
}

// SnapshotPath is where the snapshot of the journal at journalPath is kept.
func SnapshotPath(journalPath string) string { return journalPath + ".snapshot" }

// ErrSnapshot is a snapshot that cannot be used: damaged, of another format or plan. Its
// journal is replayed whole.
var ErrSnapshot = errors.New("snapshot not usable")

// savedSnapshot is what a snapshot file holds.
type savedSnapshot struct {
	Mark  journal.Mark
	Plan  [sha256.Size]byte // planPrint of the plan the state was folded against
	State savedState
}

// savedState is every field of a State the fold keeps, in exported fields (gob); what New makes
// of the plan (the experiment, brackets, model, time scale) is made again on loading.
type savedState struct {
	RunID           string
	Start           time.Time
	Trials          []savedTrial
	Order           [][]string
	Nodes, Draining [][]cloud.Node
	Known           map[string]bool
	Released        []savedNodeSpan
	Synced          map[StageKey][]string
	StageAt         map[StageKey]savedWindow
	Launches        []savedLaunchSpan
	Tries, Fails    map[TrialStage]int
	Timeouts        map[StageKey]int
	Retries         map[StageKey]int
	Interrupts      map[TrialStage]int
	LostTries       map[StageKey]int
	Interrupted     []savedInterruption
	Finished        bool
	Cancelled       string
	Stopped         string
	StopCause       journal.StopCause
	LaunchLog       []LaunchRecord
	OpenLaunch      map[string]int
	NodeLog         []NodeRecord
	NodeAt          map[string]int
	Current         []int
	Counts          Counts
	Requests        map[int]int
	Open            map[int]map[string]string
	ODTier          map[string]bool
	Plan            sim.Alloc
	Revisions       []savedRevision
	Forecast        []byte // JSON, as journaled: nil when none
	Evidence        []savedEvidence
	WaveEnded       map[StageKey]bool
	ASHA            *savedASHA
	FirstEnds       savedFirstEnds
	Tallies         map[StageKey]savedTally
	ItersAll        int
	NodesGen        []uint64
	HeldBy          map[string]savedHeld
	SpentClosed     float64
	Drawn, Results  int
}

type savedTrial struct {
	ID       string
	Bracket  int
	Pos      int
	Params   []byte // JSON, as journaled: a fold of the journal holds what JSON decodes to
	State    trial.State
	Done     map[int]float64
	Metrics  map[string]float64
	Iter     int
	Failed   map[int]bool
	Nodes    []string
	Seen     time.Time
	SeenIter int
	GPUs     int
	Fresh    bool
	Cold     bool
	Cost     float64
	Points   map[int]Scored
}

type savedWindow struct{ Start, End time.Time }

type savedNodeSpan struct {
	Bracket  int
	Node     cloud.Node
	Released time.Time
}

type savedLaunchSpan struct {
	Bracket, GPUs int
	Start, End    time.Time
}

type savedInterruption struct {
	Bracket int
	Nodes   []string
	At      time.Time
	Why     string
}

type savedRevision struct {
	Bracket, Stage int
	At             time.Time
	GPUsBefore     []int
	Event          []byte // JSON, as journaled
}

type savedEvidence struct {
	Bracket, Stage, GPUs            int
	IterSecs, Iters                 float64
	FirstSecs, FirstIters, Launches float64
	ColdSecs, ColdIters, ColdLaunch float64
}

type savedASHA struct {
	Plan     sim.ASHAPlan
	Ladder   asha.Saved
	ByIndex  []string
	Index    map[string]int
	PhaseAt  []time.Time
	EnterNow int
	RungEnd  map[StageKey]time.Time
	End      time.Time
	Promoted map[StageKey][]string
}

type savedFirstEnds struct {
	Trials, Kinds []string
	Cause         string
}

type savedTally struct{ Running, Failed, Iters int }

type savedHeld struct {
	Bracket int
	Node    cloud.Node
}

// planPrint is what tells plans apart: a snapshot folded against one plan is no state of a
// journal folded against another.
func planPrint(p Plan) ([sha256.Size]byte, error) {
	if p.TimeScale <= 0 { // New's default
		p.TimeScale = 1
	}
	b, err := json.Marshal(struct {
		Experiment *spec.Experiment
		Alloc      sim.Alloc
		ASHA       *sim.ASHAPlan
		TimeScale  float64
	}{p.Experiment, p.Alloc, p.ASHA, p.TimeScale})
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("snapshot: the plan: %w", err)
	}
	return sha256.Sum256(b), nil
}

// EncodeSnapshot is the snapshot of the state folded from the journal's prefix m (the journal's
// Mark when its last record was applied): the bytes WriteSnapshot writes. The state is read, not
// kept: the caller may apply more events once it returns.
func (s *State) EncodeSnapshot(m journal.Mark) ([]byte, error) {
	print, err := planPrint(s.origin)
	if err != nil {
		return nil, err
	}
	saved, err := s.save()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	magic := snapMagic()
	var body bytes.Buffer
	body.WriteString(magic)
	body.Write(make([]byte, 4)) // the CRC, once the rest is written
	if err := gob.NewEncoder(&body).Encode(savedSnapshot{Mark: m, Plan: print, State: saved}); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	b := body.Bytes()
	at := len(magic)
	binary.BigEndian.PutUint32(b[at:], crc32.Checksum(b[at+4:], crc32.MakeTable(crc32.Castagnoli)))
	return b, nil
}

// WriteSnapshot writes a snapshot (EncodeSnapshot's bytes) to path whole or not at all: a
// temporary file beside it, renamed over it. It is not synced: a snapshot lost or torn by a
// crash fails its checksum, or no longer matches the journal, and is ignored.
func WriteSnapshot(path string, snapshot []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	_, err = tmp.Write(snapshot)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// LoadSnapshot reads the snapshot at path: the state it holds, folded against p and logging to
// log as New's, and the journal prefix it folds. A snapshot that is damaged, of another format or
// of another plan is an error wrapping ErrSnapshot; a missing one wraps fs.ErrNotExist.
func LoadSnapshot(path string, p Plan, log io.Writer) (*State, journal.Mark, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, journal.Mark{}, fmt.Errorf("read snapshot: %w", err)
	}
	magic := snapMagic()
	at := len(magic)
	switch {
	case len(b) < at+4 || string(b[:at]) != magic:
		return nil, journal.Mark{}, fmt.Errorf("snapshot %s: not of this format: %w", path, ErrSnapshot)
	case binary.BigEndian.Uint32(b[at:]) != crc32.Checksum(b[at+4:], crc32.MakeTable(crc32.Castagnoli)):
		return nil, journal.Mark{}, fmt.Errorf("snapshot %s: checksum mismatch: %w", path, ErrSnapshot)
	}
	var saved savedSnapshot
	if err := gob.NewDecoder(bytes.NewReader(b[at+4:])).Decode(&saved); err != nil {
		return nil, journal.Mark{}, fmt.Errorf("snapshot %s: %w: %w", path, ErrSnapshot, err)
	}
	print, err := planPrint(p)
	if err != nil {
		return nil, journal.Mark{}, err
	}
	if print != saved.Plan {
		return nil, journal.Mark{}, fmt.Errorf("snapshot %s: of another plan: %w", path, ErrSnapshot)
	}
	s, err := New(p, log)
	if err != nil {
		return nil, journal.Mark{}, err
	}
	if err := s.restore(saved.State); err != nil {
		return nil, journal.Mark{}, fmt.Errorf("snapshot %s: %w: %w", path, ErrSnapshot, err)
	}
	return s, saved.Mark, nil
}

// Resume opens the journal at path for a driver that resumes its run, from the snapshot beside
// it when there is a usable one: the state the snapshot holds (nil when none is used) and the
// events after it (every event when none is). A snapshot that cannot be used is said to log and
// ignored.
func Resume(path string, p Plan, o journal.JournalOptions, log io.Writer) (*journal.Journal, *State, []journal.Event, error) {
	if log == nil {
		log = io.Discard
	}
	st, m, err := LoadSnapshot(SnapshotPath(path), p, log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(log, "%v: the journal is replayed whole\n", err)
	}
	j, events, after, err := journal.OpenJournalAfter(path, o, m)
	if err != nil {
		return nil, nil, nil, err
	}
	if st != nil && !after {
		fmt.Fprintf(log, "snapshot %s: the journal no longer begins with the %d records it folds: the journal is replayed whole\n", SnapshotPath(path), m.Records)
		st = nil
	}
	return j, st, events, nil
}

// save is the state in exported fields.
func (s *State) save() (savedState, error) {
	v := savedState{RunID: s.RunID, Start: s.Start, Order: s.Order, Nodes: s.Nodes, Draining: s.Draining, Known: s.Known,
		Synced: s.Synced, Tries: s.Tries, Fails: s.Fails, Timeouts: s.timeouts, Retries: s.retries, Interrupts: s.Interrupts,
		LostTries: s.lostTries, Finished: s.Finished, Cancelled: s.Cancelled, Stopped: s.stopped, StopCause: s.stopCause,
		LaunchLog: s.LaunchLog, OpenLaunch: s.OpenLaunch, NodeLog: s.nodeLog, NodeAt: s.nodeAt, Current: s.current,
		Counts: s.counts, Requests: s.Requests, Open: s.Open, ODTier: s.ODTier, Plan: s.Plan, WaveEnded: s.waveEnded,
		FirstEnds: savedFirstEnds{Trials: s.FirstEnds.trials, Kinds: s.FirstEnds.kinds, Cause: s.FirstEnds.cause},
		ItersAll:  s.itersAll, NodesGen: s.nodesGen, SpentClosed: s.spentClosed, Drawn: s.drawn, Results: s.results,
		Trials: make([]savedTrial, 0, len(s.Trials)), StageAt: make(map[StageKey]savedWindow, len(s.StageAt)),
		Tallies: make(map[StageKey]savedTally, len(s.tallies)), HeldBy: make(map[string]savedHeld, len(s.heldBy))}
	for _, t := range s.Trials {
		params, err := jsonOrNil(t.Params)
		if err != nil {
			return v, fmt.Errorf("trial %s: %w", t.id, err)
		}
		v.Trials = append(v.Trials, savedTrial{ID: t.id, Bracket: t.bracket, Pos: t.pos, Params: params, State: t.State, Done: t.Done,
			Metrics: t.metrics, Iter: t.Iter, Failed: t.Failed, Nodes: t.Nodes, Seen: t.seen, SeenIter: t.seenIter,
			GPUs: t.gpus, Fresh: t.fresh, Cold: t.cold, Cost: t.cost, Points: t.points})
	}
	for k, w := range s.StageAt {
		v.StageAt[k] = savedWindow{w.Start, w.end}
	}
	for _, r := range s.released {
		v.Released = append(v.Released, savedNodeSpan{r.bracket, r.node, r.released})
	}
	for _, l := range s.launches {
		v.Launches = append(v.Launches, savedLaunchSpan{l.bracket, l.gpus, l.start, l.end})
	}
	for _, i := range s.interrupted {
		v.Interrupted = append(v.Interrupted, savedInterruption{i.bracket, i.nodes, i.at, i.why})
	}
	for _, r := range s.revisions {
		e, err := json.Marshal(r.event)
		if err != nil {
			return v, err
		}
		v.Revisions = append(v.Revisions, savedRevision{r.bracket, r.stage, r.at, r.gpusBefore, e})
	}
	var err error
	if v.Forecast, err = jsonOrNil(s.Forecast); err != nil {
		return v, err
	}
	for k, o := range s.evidence {
		v.Evidence = append(v.Evidence, savedEvidence{k.Bracket, k.Stage, k.gpus, o.iterSecs, o.iters,
			o.firstSecs, o.firstIters, o.launches, o.coldSecs, o.coldIters, o.coldLaunch})
	}
	if a := s.ASHA; a != nil {
		v.ASHA = &savedASHA{Plan: a.Plan, Ladder: a.Ladder.Save(), ByIndex: a.ByIndex, Index: a.Index, PhaseAt: a.PhaseAt,
			EnterNow: a.EnterNow, RungEnd: a.rungEnd, End: a.end, Promoted: a.promoted}
	}
	for k, t := range s.tallies {
		v.Tallies[k] = savedTally{t.running, t.failed, t.iters}
	}
	for id, h := range s.heldBy {
		v.HeldBy[id] = savedHeld{h.bracket, h.node}
	}
	return v, nil
}

// restore sets the state New made to v: New's maps and slices are replaced, and those a gob
// left out (empty) are made again, as New makes them.
func (s *State) restore(v savedState) error {
	if len(v.Order) != len(s.Brackets) || len(v.Current) != len(s.Brackets) || len(v.NodesGen) != len(s.Brackets) {
		return fmt.Errorf("%d brackets, the plan has %d", len(v.Order), len(s.Brackets))
	}
	s.RunID, s.Start, s.Finished, s.Cancelled, s.stopped, s.stopCause = v.RunID, v.Start, v.Finished, v.Cancelled, v.Stopped, v.StopCause
	s.Order, s.current, s.nodesGen, s.counts, s.itersAll, s.spentClosed = v.Order, v.Current, v.NodesGen, v.Counts, v.ItersAll, v.SpentClosed
	s.Nodes, s.Draining = orMake(v.Nodes, len(s.Brackets)), orMake(v.Draining, len(s.Brackets))
	s.LaunchLog, s.nodeLog, s.Plan = v.LaunchLog, v.NodeLog, v.Plan
	s.Known, s.Synced, s.Tries, s.Fails = orMap(v.Known), orMap(v.Synced), orMap(v.Tries), orMap(v.Fails)
	s.timeouts, s.retries, s.Interrupts, s.lostTries = orMap(v.Timeouts), orMap(v.Retries), orMap(v.Interrupts), orMap(v.LostTries)
	s.OpenLaunch, s.nodeAt, s.Requests, s.Open, s.ODTier = orMap(v.OpenLaunch), orMap(v.NodeAt), orMap(v.Requests), orMap(v.Open), orMap(v.ODTier)
	s.waveEnded = orMap(v.WaveEnded)
	s.drawn, s.results = v.Drawn, v.Results
	s.FirstEnds = firstEnds{trials: v.FirstEnds.Trials, kinds: v.FirstEnds.Kinds, cause: v.FirstEnds.Cause}
	s.Trials = make(map[string]*trialRun, len(v.Trials))
	for _, t := range v.Trials {
		r := &trialRun{id: t.ID, bracket: t.Bracket, pos: t.Pos, State: t.State, Done: orMap(t.Done), metrics: t.Metrics, Iter: t.Iter,
			Failed: orMap(t.Failed), Nodes: t.Nodes, seen: t.Seen, seenIter: t.SeenIter, gpus: t.GPUs, fresh: t.Fresh, cold: t.Cold,
			cost: t.Cost, points: t.Points}
		if t.Params != nil {
			if err := json.Unmarshal(t.Params, &r.Params); err != nil {
				return fmt.Errorf("trial %s: %w", t.ID, err)
			}
		}
		s.Trials[t.ID] = r
	}
	for k, w := range v.StageAt {
		s.StageAt[k] = window{w.Start, w.End}
	}
	for _, r := range v.Released {
		s.released = append(s.released, nodeSpan{r.Bracket, r.Node, r.Released})
	}
	for _, l := range v.Launches {
		s.launches = append(s.launches, launchSpan{l.Bracket, l.GPUs, l.Start, l.End})
	}
	for _, i := range v.Interrupted {
		s.interrupted = append(s.interrupted, interruption{i.Bracket, i.Nodes, i.At, i.Why})
	}
	for _, r := range v.Revisions {
		var e journal.Event
		if err := json.Unmarshal(r.Event, &e); err != nil {
			return fmt.Errorf("a re-plan: %w", err)
		}
		s.revisions = append(s.revisions, revision{r.Bracket, r.Stage, r.At, r.GPUsBefore, journal.Upgrade(e)})
	}
	if v.Forecast != nil {
		s.Forecast = &planner.Forecast{}
		if err := json.Unmarshal(v.Forecast, s.Forecast); err != nil {
			return fmt.Errorf("the forecast: %w", err)
		}
	}
	for _, o := range v.Evidence {
		s.evidence[EvidenceKey{o.Bracket, o.Stage, o.GPUs}] = &observed{o.IterSecs, o.Iters, o.FirstSecs, o.FirstIters, o.Launches,
			o.ColdSecs, o.ColdIters, o.ColdLaunch}
	}
	if (v.ASHA == nil) != (s.ASHA == nil) {
		return errors.New("an ASHA state for a plan that is not ASHA's, or none for one that is")
	}
	if a := v.ASHA; a != nil {
		l, ok := asha.Restore(*s.exp.Algorithm.ASHA, a.Ladder)
		if !ok {
			return errors.New("the ASHA ladder has other rungs than the spec's")
		}
		s.ASHA = &ashaState{Plan: a.Plan, Ladder: l, ByIndex: a.ByIndex, Index: orMap(a.Index), PhaseAt: a.PhaseAt,
			EnterNow: a.EnterNow, rungEnd: orMap(a.RungEnd), end: a.End, promoted: orMap(a.Promoted)}
	}
	for k, t := range v.Tallies {
		s.tallies[k] = &tally{t.Running, t.Failed, t.Iters}
	}
	for id, h := range v.HeldBy {
		s.heldBy[id] = heldNode{h.Bracket, h.Node}
	}
	return nil
}

// jsonOrNil is v's JSON, nil for a nil v.
func jsonOrNil[T any](v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil, err
	}
	return b, nil
}

// orMap is m, or an empty map where a gob left an empty one out.
func orMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

// orMake is a per-bracket list of n brackets, where a gob left out empty ones.
func orMake[T any](l [][]T, n int) [][]T {
	if len(l) < n {
		l = append(l, make([][]T, n-len(l))...)
	}
	return l
}
