package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A journal of several chunks (and one record longer than a chunk) reads as it was written, in
// order, and damage deep in it is found at its own line and offset: the workers that decode
// chunks side by side change nothing of what a reader gets.
func TestScanAcrossChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, _, err := OpenJournalWith(path, JournalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for i := range 150_000 {
		keep = append(keep, fmt.Sprintf("b0-t%06d", i))
	}
	const n = 30_000
	for i := range n {
		e := Event{Ev: EvReport, Trial: fmt.Sprintf("b0-t%04d", i), Iter: i, Metrics: map[string]float64{"m": float64(i)}}
		if i == n/2 {
			e = Event{Ev: EvSync, Keep: keep} // longer than a chunk
		}
		if err := j.Note(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 3*chunkBytes {
		t.Fatalf("the journal is %d bytes: too small to span chunks", len(data))
	}
	check := func(events []Event) {
		t.Helper()
		if len(events) != n {
			t.Fatalf("%d events; want %d", len(events), n)
		}
		for i, e := range events {
			if i == n/2 {
				if e.Ev != EvSync || len(e.Keep) != len(keep) {
					t.Fatalf("event %d: %s keeping %d; want the sync keeping %d", i, e.Ev, len(e.Keep), len(keep))
				}
			} else if e.Iter != i || e.Metrics["m"] != float64(i) {
				t.Fatalf("event %d: iter %d, metric %v: out of order", i, e.Iter, e.Metrics["m"])
			}
		}
	}
	events, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	check(events)
	var scanned []Event
	if err := Scan(path, func(e Event) { scanned = append(scanned, e) }); err != nil {
		t.Fatal(err)
	}
	check(scanned)

	// A torn last record is left out.
	torn := append(bytes.Clone(data), `{"crc":"00000000","ev":"rep`...)
	if err := os.WriteFile(path, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	events, err = ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	check(events)

	// Damage in the middle is named by its line and offset.
	line := 2*n/3 + 1 // 1-based
	off := 0
	for range line - 1 {
		off += bytes.IndexByte(data[off:], '\n') + 1
	}
	damaged := bytes.Clone(data)
	damaged[off+40] ^= 1
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	var before int
	err = Scan(path, func(Event) { before++ })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Line != line || ce.Offset != int64(off) {
		t.Fatalf("damage at line %d, offset %d: got %v", line, off, err)
	}
	if before != line-1 {
		t.Errorf("%d events handed before the damage; want %d", before, line-1)
	}
}
