package journaltest_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/journal/journaltest"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/sim"
)

// The synthesized journal is one the fold takes without a note (no impossible transition: each
// launch on a node held, each done after its launch, each sync after its stage's dones), and
// it says the run it describes: finished, every stage's trials done, the cluster released.
func TestSHAJournalFoldsCleanly(t *testing.T) {
	exp, _, shape, err := journaltest.Job(81, 81)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	n, err := journaltest.WriteSHA(path, shape)
	if err != nil {
		t.Fatal(err)
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != n {
		t.Fatalf("%d events read, %d written", len(events), n)
	}
	var notes bytes.Buffer
	s, err := runstate.New(runstate.Plan{Experiment: exp, Alloc: sim.Alloc{shape.Plan}}, &notes)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		s.Apply(e)
	}
	if notes.Len() > 0 {
		t.Errorf("the fold noted:\n%s", notes.String())
	}
	snap := s.Snapshot()
	if snap.Phase != runstate.PhaseFinished || len(snap.Held()) != 0 || len(snap.Open()) != 0 {
		t.Errorf("phase %s, %d nodes held, %d launches open; want finished, none, none", snap.Phase, len(snap.Held()), len(snap.Open()))
	}
	want := 0
	for _, st := range shape.Bracket.Stages {
		want += st.Trials
	}
	if snap.Counts.Done != want || len(snap.Launches) != want {
		t.Errorf("%d done, %d launches; want %d of each", snap.Counts.Done, len(snap.Launches), want)
	}
}
