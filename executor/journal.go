package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Journal is the append-only, fsynced record of a run. Decisions are synced before Append
// returns; results noted with Note are written at once (a driver that dies keeps them) and synced
// by a group commit within GroupCommit (a machine that dies may lose that much, and those trials
// are rerun from their checkpoints).
//
// Each record carries a CRC-32C of its JSON so that damage is told apart from a torn last write.
// The first failed write or sync fails the journal for good: a driver that cannot journal must
// not go on deciding, and no record is ever written after a gap.
type Journal struct {
	mu    sync.Mutex
	f     journalFile
	size  int64 // length of the whole records in the file
	dirty bool
	err   error // the first write or sync error, returned from then on
	stop  chan struct{}
	done  chan struct{}
}

// journalFile is what the journal needs of its file, so that tests can fill the disk.
type journalFile interface {
	Write(b []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// GroupCommit is the longest a noted event waits for its sync.
const GroupCommit = 100 * time.Millisecond

// OpenJournal opens (or creates) a journal and returns the events already in it. A torn last
// record, left by a crash in mid-write, is dropped; a damaged record before the end is a
// *CorruptError and the file is left as it is.
func OpenJournal(path string) (*Journal, []Event, error) {
	return openJournal(path, func(f *os.File) journalFile { return f })
}

// openJournal is OpenJournal with the file wrapped by wrap, for tests.
func openJournal(path string, wrap func(*os.File) journalFile) (*Journal, []Event, error) {
	s, err := scanJournal(path)
	if err != nil {
		return nil, nil, err
	}
	if s.bad != nil && !s.tail {
		return nil, nil, s.bad
	}
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	// Drop a torn tail so that the next record starts on a line of its own.
	if s.good < s.size {
		if err := w.Truncate(s.good); err != nil {
			w.Close()
			return nil, nil, fmt.Errorf("open journal: drop torn last record: %w", err)
		}
	}
	j := &Journal{f: wrap(w), size: s.good, stop: make(chan struct{}), done: make(chan struct{})}
	go j.flusher()
	return j, s.events, nil
}

// Append writes one event and syncs it to disk before returning.
func (j *Journal) Append(e Event) error { return j.append(e, true) }

// Note writes one event and leaves its sync to the group commit: for results and progress.
func (j *Journal) Note(e Event) error { return j.append(e, false) }

// Err returns the error that failed the journal, or nil while it works.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

func (j *Journal) flusher() {
	defer close(j.done)
	t := time.NewTicker(GroupCommit)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
			j.mu.Lock()
			if j.dirty && j.err == nil {
				j.sync()
			}
			j.mu.Unlock()
		}
	}
}

func (j *Journal) append(e Event, sync bool) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	line, err := encodeRecord(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	n, err := j.f.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err != nil {
		j.err = fmt.Errorf("journal: %w", err)
		// Cut a partial record off, so that nothing damaged sits in the file (a full disk still
		// lets a file shrink); should that fail too, it is a torn last record, dropped on open.
		if n > 0 {
			if terr := j.f.Truncate(j.size); terr != nil {
				j.err = fmt.Errorf("journal: %w; cut the partial record: %w", err, terr)
			}
		}
		return j.err
	}
	j.size += int64(n)
	j.dirty = true
	if !sync {
		return nil
	}
	return j.sync()
}

// sync makes what was written durable; j.mu is held.
func (j *Journal) sync() error {
	if err := j.f.Sync(); err != nil {
		j.err = fmt.Errorf("journal: %w", err)
		return j.err
	}
	j.dirty = false
	return nil
}

// Sync makes everything written so far durable.
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	return j.sync()
}

// Close syncs what is pending and closes the journal file; it returns the error that failed the
// journal, if one did.
func (j *Journal) Close() error {
	close(j.stop)
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.sync()
	}
	if err := j.f.Close(); err != nil && j.err == nil {
		return fmt.Errorf("journal: %w", err)
	}
	return j.err
}

// ReadJournal returns a journal's whole events without touching the file: what `status` and
// `report` read while a driver may still be writing. A torn last record is left out; a damaged
// record before the end is a *CorruptError.
func ReadJournal(path string) ([]Event, error) {
	s, err := scanJournal(path)
	if err != nil {
		return nil, err
	}
	if s.bad != nil && !s.tail {
		return nil, s.bad
	}
	return s.events, nil
}

// CorruptError is a journal record damaged before the journal's end: not a torn last write but
// a disk or a hand that changed the file, which no automatic step may paper over.
type CorruptError struct {
	Path   string
	Line   int   // 1-based
	Offset int64 // of the line's first byte
	Reason string
}

func (e *CorruptError) Error() string {
	keep := "keeps none of it"
	if e.Line > 1 {
		keep = fmt.Sprintf("keeps lines 1-%d", e.Line-1)
	}
	return fmt.Sprintf("journal %s line %d is damaged (%s); nothing was changed. "+
		"`rubberband resume %s --repair-journal` %s, saves the whole file as %s.damaged-<time>, and reruns what came after",
		e.Path, e.Line, e.Reason, filepath.Dir(e.Path), keep, filepath.Base(e.Path))
}

// RepairJournal cuts a journal back to the records before its first damaged one, after copying
// the whole file to backup (path.damaged-TIME), so that a run can resume from what is sound. It
// returns the lines kept and dropped; a journal with nothing damaged is left alone (backup "").
func RepairJournal(path string, now time.Time) (kept, dropped int, backup string, err error) {
	s, err := scanJournal(path)
	if err != nil {
		return 0, 0, "", fmt.Errorf("repair journal: %w", err)
	}
	if s.bad == nil {
		return len(s.events), 0, "", nil
	}
	backup = path + ".damaged-" + now.UTC().Format("20060102T150405Z")
	if err := copyFile(path, backup); err != nil {
		return 0, 0, "", fmt.Errorf("repair journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, 0, backup, fmt.Errorf("repair journal: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(s.good); err != nil {
		return 0, 0, backup, fmt.Errorf("repair journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, 0, backup, fmt.Errorf("repair journal: %w", err)
	}
	return len(s.events), s.lines - len(s.events), backup, nil
}

// copyFile copies src to a new file dst, synced; it never overwrites dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("back up: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("back up: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("back up: %w", err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("back up: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("back up: %w", err)
	}
	return nil
}

// journalScan is what a pass over a journal file found.
type journalScan struct {
	events []Event       // the records before the first damaged one
	good   int64         // the length of those records
	size   int64         // the length of the file
	lines  int           // the file's lines, a last one without its newline included
	bad    *CorruptError // the first damaged record, nil if none
	tail   bool          // the damaged record is the last line: a torn write, to drop
}

// scanJournal reads a journal through to its end, so that it can tell a torn last record from
// damage followed by more records. A missing file is an empty journal.
func scanJournal(path string) (journalScan, error) {
	var s journalScan
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return s, fmt.Errorf("read journal: %w", err)
		}
		s.lines++
		if s.bad == nil {
			reason := "torn record (no newline)"
			var e Event
			if err == nil {
				e, reason = decodeRecord(line[:len(line)-1])
			}
			if reason == "" {
				s.events = append(s.events, e)
				s.good += int64(len(line))
			} else {
				s.bad = &CorruptError{Path: path, Line: s.lines, Offset: s.size, Reason: reason}
			}
		}
		s.size += int64(len(line))
	}
	s.tail = s.bad != nil && s.bad.Line == s.lines
	return s, nil
}

// crcPrefix opens every checksummed record: {"crc":"xxxxxxxx", then the event's fields.
const crcPrefix = `{"crc":"`

// encodeRecord writes an event as a journal line that stays plain JSON for other readers:
// {"crc":"<CRC-32C of the event's JSON, 8 hex digits>", followed by that JSON less its "{".
func encodeRecord(e Event) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	sum := hex8(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	line := make([]byte, 0, len(crcPrefix)+len(sum)+len(b)+2)
	line = append(line, crcPrefix...)
	line = append(line, sum[:]...)
	line = append(line, '"', ',')
	line = append(line, b[1:]...)
	return append(line, '\n'), nil
}

// decodeRecord reads one line (without its newline); reason is why it is damaged, "" if it is
// not. A line without a checksum was written before there were any; it starts with {"ev":, so
// that damage to a checksummed line's prefix cannot pass it off as one.
func decodeRecord(line []byte) (e Event, reason string) {
	switch {
	case bytes.HasPrefix(line, []byte(crcPrefix)):
		n := len(crcPrefix) + 8
		if len(line) < n+2 || line[n] != '"' || line[n+1] != ',' {
			return e, "malformed checksum"
		}
		tab := crc32.MakeTable(crc32.Castagnoli)
		sum := hex8(crc32.Update(crc32.Update(0, tab, []byte{'{'}), tab, line[n+2:]))
		if !bytes.Equal(sum[:], line[len(crcPrefix):n]) {
			return e, "checksum mismatch"
		}
	case bytes.HasPrefix(line, []byte(`{"ev":`)):
	default:
		return e, "not a journal record"
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return e, fmt.Sprintf("bad JSON: %v", err)
	}
	return e, ""
}

// hex8 is c in 8 lowercase hex digits.
func hex8(c uint32) [8]byte {
	const digits = "0123456789abcdef"
	var h [8]byte
	for i := range h {
		h[i] = digits[c>>(28-4*i)&0xf]
	}
	return h
}
