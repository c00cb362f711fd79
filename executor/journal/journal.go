package journal

import (
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

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/spec"
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
	mu      sync.Mutex
	clk     clock.Clock
	f       JournalFile
	noSync  bool
	size    int64  // length of the whole records in the file
	records int    // the records in those bytes
	crc     uint32 // CRC-32C of those bytes: what a snapshot of the state they fold to is checked by
	dirty   bool
	err     error       // the first write or sync error, returned from then on
	flush   clock.Timer // the pending group commit, while dirty
	closed  bool
	dropped string // what opening it cut off (a torn or damaged last record)
	path    string // the file, for the error that fails it
	// reserve is the file that keeps room for a pause's records (JournalOptions.Reserve), ""
	// once spent or when none could be kept; full is the fault it was spent on.
	reserve string
	full    *infra.Error
}

// JournalFile is what the journal needs of its file: an *os.File, or a wrapper that injects
// faults (a full disk, a torn write, a driver that dies at a chosen record).
type JournalFile interface {
	Write(b []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// JournalOptions open a journal.
type JournalOptions struct {
	// Clock times the group commit and names backups (default the wall clock).
	Clock clock.Clock
	// NoSync never fsyncs: for runs in virtual time, which a crash of this machine would end
	// anyway. Records are still written at once.
	NoSync bool
	// Wrap, when set, wraps the journal's file (fault injection).
	Wrap func(JournalFile) JournalFile
	// Log is told of a last record that was cut off on opening, and where its backup is.
	Log io.Writer
	// Reserve, when above 0, keeps that much room on the journal's disk in PATH.reserve: the
	// first write that finds the disk full frees it and goes on, and the journal says the disk is
	// full (Full), so that the run pauses with room left to journal its pause and the release of
	// its nodes (DefaultReserve is what drivers keep).
	Reserve int64
}

// DefaultReserve is the room a driver's journal keeps for a pause on a full disk: a few hundred
// records, and the provider's own state.
const DefaultReserve = 256 << 10

// GroupCommit is the longest a noted event waits for its sync.
const GroupCommit = 100 * time.Millisecond

// OpenJournal opens (or creates, 0600) a journal and returns the events already in it. A torn or
// damaged last record, left by a crash in mid-write, is cut off: the whole file is first copied
// beside it (path.torn-TIME), and what was cut is said (Dropped, and JournalOptions.Log). A
// damaged record before the end is a *CorruptError and the file is left as it is.
func OpenJournal(path string) (*Journal, []Event, error) {
	return OpenJournalWith(path, JournalOptions{})
}

// OpenJournalWith is OpenJournal with options.
func OpenJournalWith(path string, o JournalOptions) (*Journal, []Event, error) {
	return openJournal(path, o, Mark{})
}

// openJournal opens a journal and returns its events after the prefix from (a verified Mark),
// all of them for the zero Mark.
func openJournal(path string, o JournalOptions, from Mark) (*Journal, []Event, error) {
	clk := clock.Or(o.Clock)
	s, err := scanJournal(path, from)
	if err != nil {
		return nil, nil, err
	}
	if s.bad != nil && !s.tail {
		return nil, nil, s.bad
	}
	_, statErr := os.Stat(path)
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) && !o.NoSync { // a new file: its directory entry must last too
		if err := syncDir(filepath.Dir(path)); err != nil {
			w.Close()
			return nil, nil, fmt.Errorf("open journal: %w", err)
		}
	}
	var f JournalFile = w
	if o.Wrap != nil {
		f = o.Wrap(f)
	}
	j := &Journal{clk: clk, f: f, noSync: o.NoSync, size: s.good, records: from.Records + len(s.events), crc: s.crc, path: path}
	if o.Reserve > 0 {
		if err := keepRoom(path+".reserve", o.Reserve); err != nil {
			if o.Log != nil {
				fmt.Fprintf(o.Log, "journal: no room kept for a pause on a full disk: %v\n", err)
			}
		} else {
			j.reserve = path + ".reserve"
		}
	}
	// Cut a torn or damaged last record off so that the next record starts on a line of its
	// own — after keeping the whole file, and saying so: nothing is dropped unseen.
	if s.good < s.size {
		backup, err := copyFileFree(path, path+".torn-"+clk.Now().UTC().Format("20060102T150405.000000000Z"))
		if err != nil {
			w.Close()
			return nil, nil, fmt.Errorf("open journal: keep the torn last record: %w", err)
		}
		if err := f.Truncate(s.good); err != nil {
			w.Close()
			return nil, nil, fmt.Errorf("open journal: drop torn last record: %w", err)
		}
		j.dropped = fmt.Sprintf("journal %s: cut off its last line (line %d, %d bytes: %s), left by a driver that died in mid-write; the whole file is kept in %s",
			path, s.bad.Line, s.size-s.good, s.bad.Reason, backup)
		if o.Log != nil {
			fmt.Fprintln(o.Log, j.dropped)
		}
	}
	return j, s.events, nil
}

// Dropped says what opening the journal cut off, "" when nothing.
func (j *Journal) Dropped() string { return j.dropped }

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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

// commit is the group commit: it syncs what was noted since the last sync.
func (j *Journal) commit() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.flush = nil
	if j.dirty && j.err == nil && !j.closed {
		j.sync()
	}
}

func (j *Journal) append(e Event, sync bool) error {
	if e.At.IsZero() {
		e.At = j.clk.Now().UTC()
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
	n, err := j.write(line)
	if err != nil && j.reserve != "" && (n == 0 || j.f.Truncate(j.size) == nil) {
		if fault, ok := infra.Is(infra.Classify(err, filepath.Dir(j.path))); ok && (fault.What == infra.DiskFull || fault.What == infra.QuotaExceeded) {
			// The disk is full: the room kept for this goes to the pause's records.
			rmErr := os.Remove(j.reserve)
			j.reserve = ""
			if rmErr == nil {
				fault.Err = fmt.Errorf("journal: %w (the room it kept is freed for the pause)", fault.Err)
				j.full = fault
				n, err = j.write(line)
			}
		}
	}
	if err != nil {
		j.err = j.broken(err)
		// Cut a partial record off, so that nothing damaged sits in the file (a full disk still
		// lets a file shrink); should that fail too, it is a torn last record, dropped on open.
		if n > 0 {
			if terr := j.f.Truncate(j.size); terr != nil {
				j.err = j.broken(fmt.Errorf("%w; cut the partial record: %w", err, terr))
			}
		}
		return j.err
	}
	j.size += int64(n)
	j.records++
	j.crc = crc32.Update(j.crc, castagnoli(), line)
	j.dirty = true
	if !sync {
		if j.flush == nil && !j.noSync {
			j.flush = j.clk.AfterFunc(GroupCommit, j.commit)
		}
		return nil
	}
	return j.sync()
}

// write writes one record; a short write is an error.
func (j *Journal) write(line []byte) (int, error) {
	n, err := j.f.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	return n, err
}

// Full is the fault a journal that kept room (JournalOptions.Reserve) met: its disk filled, and
// the room is what is left for the pause's records. nil while there is room.
func (j *Journal) Full() *infra.Error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.full
}

// FreeRoom frees the room the journal kept (JournalOptions.Reserve), for a run pausing on a
// full disk: its provider's state and the pause's records must still be written.
func (j *Journal) FreeRoom() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.reserve != "" {
		os.Remove(j.reserve)
		j.reserve = ""
	}
}

// keepRoom makes path a file of size bytes (written: a sparse file keeps no room), unless it is
// one already.
func keepRoom(path string, size int64) error {
	if st, err := os.Stat(path); err == nil && st.Size() >= size {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, size))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// sync makes what was written durable; j.mu is held.
func (j *Journal) sync() error {
	if j.noSync {
		j.dirty = false
		return nil
	}
	if err := j.f.Sync(); err != nil {
		j.err = j.broken(err)
		return j.err
	}
	j.dirty = false
	return nil
}

// broken is the error that fails the journal for good: an infrastructure fault (infra.Error,
// infra.JournalBroken, naming the file), so that the driver stops deciding — and says why — rather
// than count it against a trainer.
func (j *Journal) broken(err error) error {
	return &infra.Error{What: infra.JournalBroken, Where: j.path, Err: fmt.Errorf("journal: %w", err)}
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
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	if j.flush != nil {
		j.flush.Stop()
		j.flush = nil
	}
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
	s, err := scanJournal(path, Mark{})
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
	s, err := scanJournal(path, Mark{})
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

// copyFileFree copies src to dst, or to dst.2, dst.3… when taken, and returns where.
func copyFileFree(src, dst string) (string, error) {
	for i := 1; ; i++ {
		name := dst
		if i > 1 {
			name = fmt.Sprintf("%s.%d", dst, i)
		}
		err := copyFile(src, name)
		if !errors.Is(err, fs.ErrExist) {
			return name, err
		}
	}
}

// copyFile copies src to a new file dst, synced; it never overwrites dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("back up: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
	crc    uint32        // CRC-32C of the good bytes
}

// scanJournal reads a journal through to its end, so that it can tell a torn last record from
// damage followed by more records, and keeps the records before the first damaged one (after the
// prefix from: see scanRecords). A missing file is an empty journal.
func scanJournal(path string, from Mark) (journalScan, error) {
	// The events are counted first, so that they are kept in one allocation: growing a slice of
	// a million events copies each several times, which cost more than decoding them.
	var events []Event
	if f, err := os.Open(path); err == nil {
		_, err := f.Seek(from.Size, io.SeekStart)
		lines := 0
		if err == nil {
			lines, err = countLines(f)
		}
		f.Close()
		if err != nil {
			return journalScan{}, fmt.Errorf("read journal: %w", err)
		}
		events = make([]Event, 0, lines+1)
	}
	s, err := scanRecords(path, from, func(e Event) { events = append(events, e) })
	s.events = events
	return s, err
}

// countLines counts the newlines from r's position to its end.
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 1<<20)
	n := 0
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
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
	sum := hex8(crc32.Checksum(b, castagnoli()))
	line := make([]byte, 0, len(crcPrefix)+len(sum)+len(b)+2)
	line = append(line, crcPrefix...)
	line = append(line, sum[:]...)
	line = append(line, '"', ',')
	line = append(line, b[1:]...)
	return append(line, '\n'), nil
}

// recordOrder decodes a journal's lines in order: a line without a checksum is a record only
// before the first one with a checksum (a journal written before there were any, then carried
// on), never after it.
type recordOrder struct {
	checksummed bool
	key         string // the metric name last decoded (decodeFast shares it)
}

func (o *recordOrder) decode(line []byte) (Event, string) {
	e, reason := decodeRecord(line, &o.key)
	if reason != "" {
		return e, reason
	}
	if reason := o.take(bytes.HasPrefix(line, []byte(crcPrefix))); reason != "" {
		return Event{}, reason
	}
	return e, ""
}

// take notes the next sound record, checksummed or not, and says why it is out of place ("" if
// it is not).
func (o *recordOrder) take(checksummed bool) string {
	switch {
	case checksummed:
		o.checksummed = true
	case o.checksummed:
		return "a record without its checksum after records with one"
	}
	return ""
}

// decodeRecord reads one line (without its newline); reason is why it is damaged, "" if it is
// not. A line without a checksum was written before there were any; it starts with {"ev":, so
// that damage to a checksummed line's prefix cannot pass it off as one.
func decodeRecord(line []byte, key *string) (e Event, reason string) {
	switch {
	case bytes.HasPrefix(line, []byte(crcPrefix)):
		n := len(crcPrefix) + 8
		if len(line) < n+2 || line[n] != '"' || line[n+1] != ',' {
			return e, "malformed checksum"
		}
		sum := hex8(crc32.Update(crc32.Update(0, castagnoli(), []byte{'{'}), castagnoli(), line[n+2:]))
		if !bytes.Equal(sum[:], line[len(crcPrefix):n]) {
			return e, "checksum mismatch"
		}
	case bytes.HasPrefix(line, []byte(`{"ev":`)):
	default:
		return e, "not a journal record"
	}
	if !decodeFast(line, &e, key) {
		e = Event{}
		if err := json.Unmarshal(line, &e); err != nil {
			return e, fmt.Sprintf("bad JSON: %v", err)
		}
	}
	return Upgrade(e), ""
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

// Configurations are the configurations a journal holds, by trial: drawn at the start (trial
// events) or at a trial's first launch (an adaptive sampler's, on launch events).
func Configurations(events []Event) map[string]spec.Config {
	out := map[string]spec.Config{}
	for _, e := range events {
		if (e.Ev == EvTrial || e.Ev == EvLaunch) && e.Params != nil {
			if _, ok := out[e.Trial]; !ok {
				out[e.Trial] = e.Params
			}
		}
	}
	return out
}
