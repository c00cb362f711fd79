package executor

import (
	"os"
	"path/filepath"
	"testing"
)

func TestJournalReplaysAndDropsTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, past, err := OpenJournal(path)
	if err != nil || len(past) != 0 {
		t.Fatal(err, past)
	}
	j.Append(Event{Ev: EvStart})
	j.Note(Event{Ev: EvDone, Trial: "b0-t0001", Stage: 2})
	j.Close()
	// A crash in mid-write leaves half a line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"ev":"done","trial":"b0-t00`)
	f.Close()
	j, past, err = OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(past) != 2 || past[1].Trial != "b0-t0001" || past[1].Stage != 2 {
		t.Fatalf("replayed %+v", past)
	}
	j.Append(Event{Ev: EvSync, Keep: []string{"b0-t0001"}})
	j.Close()
	_, past, _ = OpenJournal(path)
	if len(past) != 3 || past[2].Ev != EvSync {
		t.Fatalf("after the torn tail, the next event was lost or mangled: %+v", past)
	}
}
