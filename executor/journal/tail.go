package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Tail follows a journal that a driver may still be writing, reading only what was appended
// since its last call: a dashboard that watches a run re-reads no whole file. Records are checked
// as ReadJournal checks them; a last line without its newline is left for the next call (the
// driver is in mid-write, or died there).
type Tail struct {
	path string
	off  int64 // the length of the whole records read so far
	line int   // their count
	max  int64 // the most bytes one call reads
	// order is what the records read so far say of the next one (checksummed or not)
	order recordOrder
}

// NewTail follows the journal at path from its start; one call reads at most maxRead bytes
// (at least one record's worth is always read when a record is longer).
func NewTail(path string, maxRead int64) *Tail {
	return &Tail{path: path, max: max(maxRead, 1<<16)}
}

// Offset is how far into the file the records read so far reach.
func (t *Tail) Offset() int64 { return t.off }

// Line is how many records were read so far: fewer than before when the journal was cut back
// (resume --repair-journal) and Next read it again from its start.
func (t *Tail) Line() int { return t.line }

// Next returns the whole records appended since the last call (none when the file does not
// exist yet). A damaged record is a *CorruptError, and Tail stays before it.
func (t *Tail) Next() ([]Event, error) {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("follow journal: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("follow journal: %w", err)
	}
	if info.Size() < t.off { // cut back (resume --repair-journal): read again from the start
		t.off, t.line, t.order = 0, 0, recordOrder{}
	}
	if info.Size() == t.off {
		return nil, nil
	}
	n := min(info.Size()-t.off, t.max)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, t.off); err != nil && err != io.EOF {
		return nil, fmt.Errorf("follow journal: %w", err)
	}
	var events []Event
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		lines := decodeWhole(buf[:i+1])
		events = make([]Event, 0, len(lines))
		for _, l := range lines {
			reason := l.reason
			if reason == "" {
				reason = t.order.take(l.crc)
			}
			if reason != "" {
				return events, &CorruptError{Path: t.path, Line: t.line + 1, Offset: t.off, Reason: reason}
			}
			events = append(events, l.e)
			t.off += int64(l.n)
			t.line++
		}
	}
	if len(events) == 0 && n == t.max && n < info.Size()-t.off { // one record longer than max
		t.max *= 2
		return t.Next()
	}
	return events, nil
}
