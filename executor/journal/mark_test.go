package journal

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// markOf is the Mark of a journal file's first n lines, computed from its bytes.
func markOf(t *testing.T, path string, n int) Mark {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m Mark
	for range n {
		i := bytes.IndexByte(b, '\n') + 1
		m.Size, m.Records = m.Size+int64(i), m.Records+1
		m.CRC = crc32.Update(m.CRC, crc32.MakeTable(crc32.Castagnoli), b[:i])
		b = b[i:]
	}
	return m
}

// A journal's Mark is the size, records and CRC-32C of what it holds, as appended and as reopened
// (a torn last record cut off); OpenJournalAfter decodes only the records after a Mark the file
// begins with, and every record for one it does not (another CRC, a file cut shorter).
func TestMarkAndOpenAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	writeJournal(t, path, 6)
	j, past, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, past, 6)
	if got, want := j.Mark(), markOf(t, path, 6); got != want {
		t.Fatalf("reopened: mark %+v, the file's %+v", got, want)
	}
	j.Note(testEvent(6))
	if got, want := j.Mark(), markOf(t, path, 7); got != want {
		t.Fatalf("appended: mark %+v, the file's %+v", got, want)
	}
	j.Close()
	// a torn record after the mark: cut off, and the mark is the whole records'
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"crc":"0000`)
	f.Close()

	at := markOf(t, path, 4)
	j, after, ok, err := OpenJournalAfter(path, JournalOptions{}, at)
	if err != nil || !ok {
		t.Fatalf("after a matching mark: %v, %v", ok, err)
	}
	if len(after) != 3 || after[0].Trial != testEvent(4).Trial || after[2].Trial != testEvent(6).Trial {
		t.Fatalf("after record 4: %d events, from %s", len(after), after[0].Trial)
	}
	if got, want := j.Mark(), markOf(t, path, 7); got != want || j.Dropped() == "" {
		t.Fatalf("the torn record: mark %+v, want %+v; dropped %q", got, want, j.Dropped())
	}
	j.Close()

	// legacy records (no checksum) before the mark: those after it must have one, as in a whole read
	legacy := filepath.Join(t.TempDir(), "legacy.jsonl")
	var body []byte
	for i := range 2 {
		b, _ := json.Marshal(testEvent(i))
		body = append(append(body, b...), '\n')
	}
	b, _ := json.Marshal(testEvent(2))
	os.WriteFile(legacy, append(append(body, b...), '\n'), 0o644)
	if _, events, ok, err := OpenJournalAfter(legacy, JournalOptions{}, markOf(t, legacy, 2)); err != nil || !ok || len(events) != 1 {
		t.Fatalf("legacy records after legacy ones: %v %d %v", ok, len(events), err)
	}

	whole, _ := os.ReadFile(path)
	for name, m := range map[string]Mark{
		"another CRC":        {Size: at.Size, Records: at.Records, CRC: at.CRC + 1},
		"not a record's end": {Size: at.Size - 1, Records: at.Records, CRC: crc32.Checksum(whole[:at.Size-1], crc32.MakeTable(crc32.Castagnoli))},
		"past the end":       {Size: 1 << 30, Records: 99, CRC: at.CRC},
		"none":               {},
	} {
		j, events, ok, err := OpenJournalAfter(path, JournalOptions{}, m)
		if err != nil || ok || len(events) != 7 {
			t.Fatalf("%s: after %v, %d events, %v", name, ok, len(events), err)
		}
		j.Close()
	}
}
