package journal

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkJournalNote measures noting a trial's report, the journal's most frequent write, so
// that the per-record checksum can be shown to cost nothing noticeable next to the write itself.
func BenchmarkJournalNote(b *testing.B) {
	j, _, err := OpenJournal(filepath.Join(b.TempDir(), "journal.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	e := Event{Ev: EvReport, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Trial: "b0-t0001", Iter: 120,
		Metrics: map[string]float64{"loss": 0.4321, "accuracy": 0.8765}}
	b.ReportAllocs()
	for b.Loop() {
		if err := j.Note(e); err != nil {
			b.Fatal(err)
		}
	}
}
