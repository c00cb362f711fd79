package runstate_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/journal/journaltest"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/sim"
)

// largeJournal writes a finished run of trials trials' journal (journaltest.SHA) and returns its
// path and the plan to fold it against.
func largeJournal(b *testing.B, trials int) (string, runstate.Plan) {
	b.Helper()
	exp, _, shape, err := journaltest.Job(trials, 729)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "journal.jsonl")
	if _, err := journaltest.WriteSHA(path, shape); err != nil {
		b.Fatal(err)
	}
	return path, runstate.Plan{Experiment: exp, Alloc: sim.Alloc{shape.Plan}}
}

// Where a 100,000-trial journal's replay goes: reading (decoding and checking) its records,
// folding them, and the views status draws.
func BenchmarkLargeReplay(b *testing.B) {
	path, plan := largeJournal(b, 100_000)
	events, err := journal.ReadJournal(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d events", len(events))
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			if _, err := journal.ReadJournal(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("resume", func(b *testing.B) { // what a driver's resume does: open the journal, fold it
		for b.Loop() {
			j, events, err := journal.OpenJournalWith(path, journal.JournalOptions{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := runstate.Fold(plan, events); err != nil {
				b.Fatal(err)
			}
			j.Close()
		}
	})
	// A resume from the snapshot taken at the journal's last sync: the prefix's CRC checked,
	// the snapshot loaded, and the records after it decoded and folded.
	last := 0
	for i, e := range events {
		if e.Ev == journal.EvSync {
			last = i + 1
		}
	}
	st := fold(b, plan, events[:last])
	snap, err := st.EncodeSnapshot(marks(b, path)[last-1])
	if err != nil {
		b.Fatal(err)
	}
	if err := runstate.WriteSnapshot(runstate.SnapshotPath(path), snap); err != nil {
		b.Fatal(err)
	}
	b.Logf("snapshot at record %d of %d: %d bytes", last, len(events), len(snap))
	b.Run("resume-snapshot", func(b *testing.B) {
		resumeFromSnapshot(b, path, plan)
	})
	// The same from the first sync's snapshot (the end of stage 0, about two thirds of the
	// records): what a driver dying at the run's end pays when the last snapshot was skipped.
	first := slices.IndexFunc(events, func(e journal.Event) bool { return e.Ev == journal.EvSync }) + 1
	early, err := fold(b, plan, events[:first]).EncodeSnapshot(marks(b, path)[first-1])
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("first sync at record %d: %d records after it", first, len(events)-first)
	b.Run("resume-snapshot-first-sync", func(b *testing.B) {
		if err := runstate.WriteSnapshot(runstate.SnapshotPath(path), early); err != nil {
			b.Fatal(err)
		}
		resumeFromSnapshot(b, path, plan)
	})
	b.Run("snapshot-write", func(b *testing.B) { // what a sync costs the driver: encoded under its lock, then written
		for b.Loop() {
			snap, err := st.EncodeSnapshot(journal.Mark{})
			if err != nil {
				b.Fatal(err)
			}
			if err := runstate.WriteSnapshot(filepath.Join(b.TempDir(), "s"), snap); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fold", func(b *testing.B) {
		for b.Loop() {
			if _, err := runstate.Fold(plan, events); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inspect", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := runstate.Inspect(plan, events, events[len(events)-1].At.Add(time.Second)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// resumeFromSnapshot resumes the journal at path from its snapshot, b.N times: Resume, then the
// records after the snapshot folded.
func resumeFromSnapshot(b *testing.B, path string, plan runstate.Plan) {
	for b.Loop() {
		j, st, rest, err := runstate.Resume(path, plan, journal.JournalOptions{NoSync: true}, nil)
		if err != nil || st == nil {
			b.Fatal("snapshot not used", err)
		}
		for _, e := range rest {
			st.Apply(e)
		}
		j.Close()
	}
}
