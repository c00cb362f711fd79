package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
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

// testEvent is the i-th event (from 0) of a test journal: a report of trial i+1.
func testEvent(i int) Event {
	return Event{Ev: EvReport, At: time.Date(2026, 1, 2, 3, 4, 5+i, 0, time.UTC), Trial: fmt.Sprintf("b0-t%04d", i+1),
		Iter: i + 1, Metrics: map[string]float64{"loss": 1 / float64(i+1)}}
}

// writeJournal journals n test events, decisions and results alternately, and returns its lines.
func writeJournal(t *testing.T, path string, n int) [][]byte {
	t.Helper()
	j, _, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		add := j.Note
		if i%2 == 0 {
			add = j.Append
		}
		if err := add(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) != 0 || len(lines) != n+1 {
		t.Fatalf("%d events gave %d lines", n, len(lines)-1)
	}
	return lines[:n]
}

// flipTrial changes the trial's last digit in a line: still valid JSON, so only the checksum
// can tell.
func flipTrial(line []byte) []byte {
	out := bytes.Clone(line)
	i := bytes.Index(out, []byte(`"trial":"b0-t`)) + len(`"trial":"b0-t0000`) - 1
	out[i] ^= 1
	return out
}

// checkEvents fails unless got are test events 0 to n-1.
func checkEvents(t *testing.T, got []Event, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d events, want %d", len(got), n)
	}
	for i, e := range got {
		if w := testEvent(i); e.Trial != w.Trial || e.Iter != w.Iter || !e.At.Equal(w.At) || e.Metrics["loss"] != w.Metrics["loss"] {
			t.Fatalf("event %d is %+v, want %+v", i, e, w)
		}
	}
}

func TestJournalDamage(t *testing.T) {
	const n = 50
	cases := []struct {
		name   string
		damage func(lines [][]byte) // changes lines in place
		line   int                  // the damaged line OpenJournal reports, 0 for a dropped tail
		reason string
		kept   int // events read
	}{
		{"byte flipped mid-file", func(l [][]byte) { l[19] = flipTrial(l[19]) }, 20, "checksum mismatch", 0},
		{"byte flipped in line 1", func(l [][]byte) { l[0] = flipTrial(l[0]) }, 1, "checksum mismatch", 0},
		{"checksum key damaged mid-file", func(l [][]byte) { l[19] = bytes.Replace(l[19], []byte(`"crc"`), []byte(`"crb"`), 1) },
			20, "not a journal record", 0},
		{"checksum digit damaged mid-file", func(l [][]byte) { l[19] = bytes.Clone(l[19]); l[19][len(crcPrefix)] ^= 0x40 },
			20, "checksum mismatch", 0},
		{"bad legacy JSON mid-file", func(l [][]byte) { l[19] = []byte(`{"ev":"report",` + "\n") }, 20, "bad JSON", 0},
		{"empty line mid-file", func(l [][]byte) { l[19] = []byte("\n") }, 20, "not a journal record", 0},
		{"two records run together", func(l [][]byte) { l[19] = bytes.TrimSuffix(l[19], []byte("\n")) }, 20, "checksum mismatch", 0},
		{"torn last record", func(l [][]byte) { l[n-1] = l[n-1][:len(l[n-1])/2] }, 0, "", n - 1},
		{"last record without its newline", func(l [][]byte) { l[n-1] = bytes.TrimSuffix(l[n-1], []byte("\n")) }, 0, "", n - 1},
		{"checksum mismatch in the last record", func(l [][]byte) { l[n-1] = flipTrial(l[n-1]) }, 0, "", n - 1},
		{"intact", func([][]byte) {}, 0, "", n},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.jsonl")
			lines := writeJournal(t, path, n)
			c.damage(lines)
			damaged := bytes.Join(lines, nil)
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}

			read, rerr := ReadJournal(path)
			j, past, err := OpenJournal(path)
			if c.line > 0 {
				for _, err := range []error{rerr, err} {
					var ce *CorruptError
					if !errors.As(err, &ce) {
						t.Fatalf("got %v, want a *CorruptError", err)
					}
					offset := int64(len(bytes.Join(lines[:c.line-1], nil)))
					if ce.Path != path || ce.Line != c.line || ce.Offset != offset || !strings.Contains(ce.Reason, c.reason) {
						t.Fatalf("got %+v, want line %d at %d (%s)", ce, c.line, offset, c.reason)
					}
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
					t.Fatal("opening a damaged journal changed it")
				}
				return
			}
			if rerr != nil || err != nil {
				t.Fatal(rerr, err)
			}
			checkEvents(t, read, c.kept)
			checkEvents(t, past, c.kept)
			// The next record starts on a line of its own, after the records kept.
			if err := j.Append(testEvent(c.kept)); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			after, err := ReadJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			checkEvents(t, after, c.kept+1)
		})
	}
}

func TestCorruptErrorSaysWhereAndWhatToDo(t *testing.T) {
	err := error(&CorruptError{Path: "/s/run/journal.jsonl", Line: 101, Offset: 9999, Reason: "checksum mismatch"})
	for _, want := range []string{"/s/run/journal.jsonl line 101", "(checksum mismatch)", "nothing was changed",
		"`rubberband resume /s/run --repair-journal` keeps lines 1-100", "journal.jsonl.damaged-"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestJournalReadsLegacyRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	var legacy []byte
	for i := range 3 {
		b, _ := json.Marshal(testEvent(i))
		legacy = append(append(legacy, b...), '\n')
	}
	if err := os.WriteFile(path, legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	j, past, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, past, 3)
	j.Append(testEvent(3))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, legacy) || !bytes.HasPrefix(b[len(legacy):], []byte(crcPrefix)) {
		t.Fatalf("legacy records changed or the new one has no checksum:\n%s", b)
	}
	events, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, events, 4)
}

func TestJournalRecordsAreJSONEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	lines := writeJournal(t, path, 1)
	// What readers other than the journal do, such as the CLI's tests.
	var e Event
	if err := json.Unmarshal(lines[0], &e); err != nil {
		t.Fatalf("line 1 %q: %v", lines[0], err)
	}
	checkEvents(t, []Event{e}, 1)
	want, _ := json.Marshal(testEvent(0))
	if got := string(lines[0]); got != fmt.Sprintf(`{"crc":"%08x",%s`+"\n", crcOf(want), want[1:]) {
		t.Fatalf("record %s, want the event's JSON after its CRC-32C", got)
	}
}

func TestRepairJournal(t *testing.T) {
	const n = 50
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	cases := []struct {
		name          string
		damage        func(l [][]byte)
		kept, dropped int
	}{
		{"byte flipped in line 20", func(l [][]byte) { l[19] = flipTrial(l[19]) }, 19, 31},
		{"line 1 damaged", func(l [][]byte) { l[0] = []byte("garbage\n") }, 0, 50},
		{"torn last record", func(l [][]byte) { l[n-1] = l[n-1][:10] }, 49, 1},
		{"intact", func([][]byte) {}, 50, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.jsonl")
			lines := writeJournal(t, path, n)
			c.damage(lines)
			damaged := bytes.Join(lines, nil)
			os.WriteFile(path, damaged, 0o644)

			kept, dropped, backup, err := RepairJournal(path, now)
			if err != nil {
				t.Fatal(err)
			}
			if kept != c.kept || dropped != c.dropped {
				t.Fatalf("kept %d and dropped %d lines, want %d and %d", kept, dropped, c.kept, c.dropped)
			}
			after, _ := os.ReadFile(path)
			if c.dropped == 0 {
				if backup != "" || !bytes.Equal(after, damaged) {
					t.Fatalf("repairing a sound journal changed it (backup %q)", backup)
				}
				return
			}
			if want := path + ".damaged-20260102T020405Z"; backup != want {
				t.Fatalf("backup %s, want %s", backup, want)
			}
			if saved, _ := os.ReadFile(backup); !bytes.Equal(saved, damaged) {
				t.Fatal("the backup is not the whole damaged file")
			}
			if !bytes.Equal(after, bytes.Join(lines[:c.kept], nil)) {
				t.Fatalf("repaired journal is not exactly the %d lines before the damage", c.kept)
			}
			_, past, err := OpenJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			checkEvents(t, past, c.kept)
			// A second repair in the same second never overwrites the first backup.
			os.WriteFile(path, damaged, 0o644)
			if _, _, _, err := RepairJournal(path, now); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("second repair: %v, want the backup to exist already", err)
			}
		})
	}
}

// fullDisk is a journal file on a disk with room for left more bytes.
type fullDisk struct {
	*os.File
	left int
}

func (d *fullDisk) Write(b []byte) (int, error) {
	if len(b) <= d.left {
		d.left -= len(b)
		return d.File.Write(b)
	}
	n, _ := d.File.Write(b[:d.left])
	d.left = 0
	return n, &fs.PathError{Op: "write", Path: d.Name(), Err: syscall.ENOSPC}
}

func TestJournalDiskFull(t *testing.T) {
	const before = 5 // events journaled before the disk fills
	// What the journal holds when all goes well, to tell how many records fit in the room left.
	want := writeJournal(t, filepath.Join(t.TempDir(), "journal.jsonl"), before+10)
	next := len(want[before])
	three := len(bytes.Join(want[before:before+3], nil))
	for _, room := range []int{0, 1, next / 2, next - 1, next, next + 1, three + len(want[before+3])/3} {
		t.Run(fmt.Sprintf("room for %d bytes", room), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.jsonl")
			writeJournal(t, path, before)
			j, _, err := OpenJournalWith(path, JournalOptions{Wrap: func(f JournalFile) JournalFile { return &fullDisk{File: f.(*os.File), left: room} }})
			if err != nil {
				t.Fatal(err)
			}
			n := before
			for ; ; n++ {
				if err = j.Append(testEvent(n)); err != nil {
					break
				}
			}
			fit := before
			for left := room; len(want[fit]) <= left; fit++ {
				left -= len(want[fit])
			}
			if n != fit {
				t.Fatalf("%d events went in, want %d", n, fit)
			}
			for name, err := range map[string]error{"first": err, "Note": j.Note(testEvent(n)), "Append": j.Append(testEvent(n)),
				"Sync": j.Sync(), "Err": j.Err(), "Close": j.Close()} {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("%s after a full disk: %v, want ENOSPC", name, err)
				}
			}
			// Only whole records are left, and all of them.
			if b, _ := os.ReadFile(path); !bytes.Equal(b, bytes.Join(want[:n], nil)) {
				t.Fatalf("the journal holds %d bytes, want the %d whole records journaled:\n%s", len(b), n, b)
			}
			_, past, err := OpenJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			checkEvents(t, past, n)
		})
	}
}

// failingSync is a journal file whose syncs fail, as after a writeback error.
type failingSync struct{ *os.File }

func (failingSync) Sync() error { return syscall.EIO }

func failSyncs(f JournalFile) JournalFile { return failingSync{f.(*os.File)} }

func TestJournalSyncErrorIsSticky(t *testing.T) {
	t.Run("Append", func(t *testing.T) {
		j, _, err := OpenJournalWith(filepath.Join(t.TempDir(), "journal.jsonl"), JournalOptions{Wrap: failSyncs})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Append(testEvent(0)); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Append: %v, want EIO", err)
		}
		if err := j.Note(testEvent(1)); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Note after a failed sync: %v, want EIO", err)
		}
		if err := j.Close(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Close: %v, want EIO", err)
		}
	})
	t.Run("group commit", func(t *testing.T) {
		// In virtual time: the group commit is due GroupCommit after the note, not sooner.
		s := clock.NewSim(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
		err := s.Run(context.Background(), func(ctx context.Context) {
			j, _, err := OpenJournalWith(filepath.Join(t.TempDir(), "journal.jsonl"), JournalOptions{Clock: s, Wrap: failSyncs})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if err := j.Note(testEvent(0)); err != nil {
				t.Fatal(err)
			}
			s.Sleep(ctx, GroupCommit-time.Millisecond)
			if err := j.Err(); err != nil {
				t.Fatalf("Err before the group commit is due: %v", err)
			}
			s.Sleep(ctx, time.Millisecond)
			if !errors.Is(j.Err(), syscall.EIO) {
				t.Fatalf("Err after a failed group commit: %v, want EIO", j.Err())
			}
			if err := j.Note(testEvent(1)); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Note after a failed group commit: %v, want EIO", err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestJournalConcurrentWriters(t *testing.T) {
	const writers, each = 8, 100
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, _, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				add := j.Note
				if i%10 == 0 {
					add = j.Append
				}
				if err := add(testEvent(w*each + i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range events {
		seen[e.Trial] = true
	}
	if len(events) != writers*each || len(seen) != writers*each {
		t.Fatalf("%d events of %d trials, want %d whole ones", len(events), len(seen), writers*each)
	}
}

// crcOf is the CRC-32C that a record carries, computed apart from the journal's code.
func crcOf(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			crc = crc>>1 ^ 0x82f63b78&-(crc&1)
		}
	}
	return ^crc
}
