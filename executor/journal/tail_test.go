package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Tail returns each record once, in order, as it is appended; it leaves a torn last line for the
// next call and stops at damage.
func TestTailFollowsAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	tail := NewTail(path, 1<<16)
	if evs, err := tail.Next(); err != nil || len(evs) != 0 {
		t.Fatalf("no file yet: %v %v", evs, err)
	}
	j, _, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j.Append(Event{Ev: EvStart, At: at, RunID: "r1"})
	j.Append(Event{Ev: EvTrial, At: at, Trial: "b0-t0000"})
	evs, err := tail.Next()
	if err != nil || len(evs) != 2 || evs[0].RunID != "r1" || evs[1].Trial != "b0-t0000" {
		t.Fatalf("first read: %+v %v", evs, err)
	}
	if evs, err := tail.Next(); err != nil || len(evs) != 0 {
		t.Fatalf("nothing new: %+v %v", evs, err)
	}
	j.Append(Event{Ev: EvLaunch, At: at, Trial: "b0-t0000", Try: 1})
	j.Close()
	// A torn record after it: left for later.
	line, _ := encodeRecord(Event{Ev: EvDone, At: at, Trial: "b0-t0000"})
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(line[:10])
	evs, err = tail.Next()
	if err != nil || len(evs) != 1 || evs[0].Ev != EvLaunch {
		t.Fatalf("after the launch: %+v %v", evs, err)
	}
	f.Write(line[10:])
	if evs, err = tail.Next(); err != nil || len(evs) != 1 || evs[0].Ev != EvDone {
		t.Fatalf("the record completed: %+v %v", evs, err)
	}
	f.Write([]byte("{\"crc\":\"00000000\",\"ev\":\"done\"}\n"))
	f.Close()
	var ce *CorruptError
	if _, err := tail.Next(); !errors.As(err, &ce) || ce.Line != 5 {
		t.Fatalf("damage: %v", err)
	}
	// A small read limit still reads every record, one call after another.
	small := NewTail(path, 1)
	small.max = 40
	var all []Event
	for range 20 {
		evs, err := small.Next()
		all = append(all, evs...)
		if err != nil {
			break
		}
	}
	if len(all) != 4 {
		t.Fatalf("a small limit read %d records", len(all))
	}
}
