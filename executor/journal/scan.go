package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
)

// Scan reads a journal as ReadJournal does and hands its events to fn in order, keeping none:
// a reader that folds a 100,000-trial run's million records holds one chunk of them at a time,
// not a gigabyte. A damaged record before the end is a *CorruptError, returned once fn has had
// every record before it; a torn last record is left out.
func Scan(path string, fn func(Event)) error {
	s, err := scanRecords(path, Mark{}, fn)
	if err != nil {
		return err
	}
	if s.bad != nil && !s.tail {
		return s.bad
	}
	return nil
}

// ScanAfter is Scan of the records after m, for a reader that holds what the records up to m
// fold to (a snapshot's state): when the file still begins with m's prefix (by its CRC-32C, read
// but not decoded) fn has the records after it and after is true; otherwise fn has nothing and
// after is false, and the reader scans the journal whole (it is the truth).
func ScanAfter(path string, m Mark, fn func(Event)) (after bool, err error) {
	v, err := verifyPrefix(path, m)
	if err != nil || v.Size == 0 {
		return false, err
	}
	s, err := scanRecords(path, v, fn)
	if err != nil {
		return true, err
	}
	if s.bad != nil && !s.tail {
		return true, s.bad
	}
	return true, nil
}

// scanChunk is a run of whole lines of the file (the last one may lack its newline: a torn
// record), decoded by a worker while the reader reads on and the caller takes earlier chunks.
type scanChunk struct {
	data   []byte
	lines  []scanLine
	err    error // reading the file failed here
	decode sync.WaitGroup
}

// scanLine is one line decoded.
type scanLine struct {
	e      Event
	n      int    // bytes, its newline included
	reason string // why it is damaged, "" when sound
	crc    bool   // the record has a checksum
}

// chunkBytes is what one chunk holds: large enough that a worker's hand-off costs nothing
// against its decoding, small enough that a few in flight hold little.
const chunkBytes = 1 << 20

// scanRecords reads a journal through to its end (to tell a torn last record from damage
// followed by more records), handing fn each record before the first damaged one, from the end
// of the prefix from on (a verified Mark; the zero Mark: the whole file). Lines are decoded on as
// many workers as there are CPUs, and taken in order. A missing file is an empty journal.
func scanRecords(path string, from Mark, fn func(Event)) (journalScan, error) {
	s := journalScan{good: from.Size, size: from.Size, lines: from.Records, crc: from.CRC}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(from.Size, io.SeekStart); err != nil {
		return s, fmt.Errorf("read journal: %w", err)
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), 4))
	work := make(chan *scanChunk, workers)
	ordered := make(chan *scanChunk, 2*workers) // bounds what is in flight
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range work {
				c.decodeLines()
				c.decode.Done()
			}
		})
	}
	// Chunks are handed back once taken and read into again: a journal's million lines then
	// cost a few chunks' allocations, not one each.
	free := make(chan *scanChunk, 4*workers)
	go func() {
		defer close(ordered)
		defer close(work)
		readChunks(f, free, func(c *scanChunk) {
			c.decode.Add(1)
			if c.err != nil {
				c.decode.Done()
			} else {
				work <- c
			}
			ordered <- c
		})
	}()
	order := recordOrder{checksummed: from.checksummed}
	var readErr error
	for c := range ordered { // drained to the end, so that the reader and the workers finish
		c.decode.Wait()
		if c.err != nil {
			readErr = c.err
			continue
		}
		at := 0 // the line's first byte in c.data
		for _, l := range c.lines {
			s.lines++
			if s.bad == nil && readErr == nil {
				reason := l.reason
				if reason == "" {
					reason = order.take(l.crc)
				}
				if reason == "" {
					fn(l.e)
					s.good += int64(l.n)
					s.crc = crc32.Update(s.crc, castagnoli(), c.data[at:at+l.n])
				} else {
					s.bad = &CorruptError{Path: path, Line: s.lines, Offset: s.size, Reason: reason}
				}
			}
			s.size += int64(l.n)
			at += l.n
		}
		select {
		case free <- c:
		default:
		}
	}
	wg.Wait()
	if readErr != nil {
		return s, fmt.Errorf("read journal: %w", readErr)
	}
	s.tail = s.bad != nil && s.bad.Line == s.lines
	return s, nil
}

// readChunks cuts f into chunks of whole lines (a line longer than a chunk is a chunk of its
// own) and hands each to put; a read error is a chunk with err, the last one.
func readChunks(f io.Reader, free chan *scanChunk, put func(*scanChunk)) {
	r := bufio.NewReaderSize(f, chunkBytes)
	next := func() *scanChunk {
		select {
		case c := <-free:
			c.data, c.lines, c.err = c.data[:0], c.lines[:0], nil
			return c
		default:
			return &scanChunk{data: make([]byte, 0, chunkBytes+chunkBytes/8)}
		}
	}
	c := next()
	for {
		line, err := r.ReadSlice('\n')
		c.data = append(c.data, line...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if len(c.data) > 0 {
				put(c)
			}
			return
		case err != nil:
			if i := bytes.LastIndexByte(c.data, '\n'); i >= 0 {
				c.data = c.data[:i+1]
				put(c)
			}
			put(&scanChunk{err: err})
			return
		}
		if len(c.data) >= chunkBytes {
			put(c)
			c = next()
		}
	}
}

// decodeLines decodes the chunk's lines: a last line without its newline is a torn record.
func (c *scanChunk) decodeLines() {
	if n := bytes.Count(c.data, []byte{'\n'}) + 1; cap(c.lines) < n {
		c.lines = make([]scanLine, 0, n)
	}
	var key string
	for data := c.data; len(data) > 0; {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			c.lines = append(c.lines, scanLine{n: len(data), reason: "torn record (no newline)"})
			return
		}
		l := scanLine{n: i + 1, crc: bytes.HasPrefix(data, []byte(crcPrefix))}
		l.e, l.reason = decodeRecord(data[:i], &key)
		c.lines = append(c.lines, l)
		data = data[i+1:]
	}
}

// decodeWhole decodes buf's whole lines (buf ends with a newline), cut into parts of about a
// chunk decoded side by side.
func decodeWhole(buf []byte) []scanLine {
	var parts []*scanChunk
	for len(buf) > 0 {
		n := len(buf)
		if n > chunkBytes {
			n = chunkBytes + bytes.IndexByte(buf[chunkBytes:], '\n') + 1
		}
		parts = append(parts, &scanChunk{data: buf[:n]})
		buf = buf[n:]
	}
	var wg sync.WaitGroup
	for _, c := range parts[min(1, len(parts)):] {
		wg.Go(c.decodeLines)
	}
	if len(parts) > 0 {
		parts[0].decodeLines()
	}
	wg.Wait()
	var lines []scanLine
	for _, c := range parts {
		lines = append(lines, c.lines...)
	}
	return lines
}
