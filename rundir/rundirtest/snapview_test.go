package rundirtest_test

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"io"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// A view of a run whose driver left a snapshot beside its journal starts from it and folds only
// the records after it, and says what a fold of the whole journal says; a snapshot that does not
// match the journal (it was cut back or rewritten) is not used.
func TestViewStartsFromTheSnapshot(t *testing.T) {
	dir, err := rundirtest.Large(t.TempDir(), "snap", 243, 81, 3) // its driver died in stage 3
	if err != nil {
		t.Fatal(err)
	}
	st, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	path, lines, err := rundirtest.JournalLines(dir)
	if err != nil {
		t.Fatal(err)
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	at := 0 // the records up to the last sync
	for i, e := range events {
		if e.Ev == journal.EvSync {
			at = i + 1
		}
	}
	if at == 0 || at == len(events) {
		t.Fatalf("sync at %d of %d records: nothing to snapshot before, or nothing after", at, len(events))
	}
	whole := viewJSON(t, st)
	// snapshotOf writes the fold of events[:folded] as the state of the journal's first at
	// records, its checksum off by crcOff.
	snapshotOf := func(folded int, crcOff uint32) {
		s, err := runstate.New(st.RunPlan(), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events[:folded] {
			s.Apply(e)
		}
		prefix := bytes.Join(lines[:at], nil)
		m := journal.Mark{Size: int64(len(prefix)), Records: at, CRC: crc32.Checksum(prefix, crc32.MakeTable(crc32.Castagnoli)) + crcOff}
		b, err := s.EncodeSnapshot(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := runstate.WriteSnapshot(runstate.SnapshotPath(path), b); err != nil {
			t.Fatal(err)
		}
	}
	snapshotOf(at, 0)
	if got := viewJSON(t, st); got != whole {
		t.Errorf("the view from the snapshot differs from the whole fold's:\n%s\nwant\n%s", got, whole)
	}
	snapshotOf(at-40, 0) // a state that lacks records its mark covers: seen only if the snapshot is used
	if got := viewJSON(t, st); got == whole {
		t.Fatal("a snapshot missing 40 records gave the whole fold's view: the snapshot is not read")
	}
	// A journal that no longer begins with what the snapshot folded (its prefix's checksum
	// differs: cut back, repaired, rewritten): the snapshot is not used, the whole journal is.
	snapshotOf(at-40, 1)
	if got := viewJSON(t, st); got != whole {
		t.Errorf("a snapshot of another prefix was used:\n%s\nwant\n%s", got, whole)
	}
}

func viewJSON(t *testing.T, st *rundir.State) string {
	t.Helper()
	v, err := rundir.NewView(st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(struct {
		Res  *runstate.Result
		Snap *runstate.Snapshot
	}{v.Res, v.Snap})
	if err != nil {
		t.Fatal(err)
	}
	word, why := v.Status()
	synced, of := v.Stages()
	return string(b) + word + why + string(rune('0'+synced)) + string(rune('0'+of))
}
