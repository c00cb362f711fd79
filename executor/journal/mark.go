package journal

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
)

// Mark is a point in a journal: its first Size bytes, Records records, whose CRC-32C is CRC.
// A snapshot of the state those records fold to carries the Mark it covers, so that a driver
// that resumes can tell (by a checksum of the prefix, without decoding it) that the journal
// still begins with what the snapshot folded.
type Mark struct {
	Size    int64
	Records int
	CRC     uint32
	// checksummed is true when the prefix's records carry checksums (its last one does): the
	// records after it must then too (recordOrder). Known once the prefix is verified.
	checksummed bool
}

// castagnoli is the CRC-32C table the journal's checksums use (the package caches it).
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// Mark is where the journal stands: everything appended so far. The state a driver folded from
// these records is what a snapshot taken now holds.
func (j *Journal) Mark() Mark {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Mark{Size: j.size, Records: j.records, CRC: j.crc}
}

// OpenJournalAfter is OpenJournalWith for a driver that holds the state the journal's prefix m
// folds to (a snapshot's): when the file still begins with that prefix (its CRC-32C matches;
// the prefix is read but not decoded), it returns only the events after it and after is true.
// Otherwise (a journal cut back, repaired or rewritten, or the zero Mark) it returns every event
// and after is false: the journal, not the snapshot, is the truth.
func OpenJournalAfter(path string, o JournalOptions, m Mark) (j *Journal, events []Event, after bool, err error) {
	from, err := verifyPrefix(path, m)
	if err != nil {
		return nil, nil, false, err
	}
	j, events, err = openJournal(path, o, from)
	return j, events, from.Size > 0, err
}

// verifyPrefix is m, verified against the file (checksummed known), or the zero Mark when the
// file does not begin with m's prefix of whole records.
func verifyPrefix(path string, m Mark) (Mark, error) {
	if m.Size <= 0 {
		return Mark{}, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Mark{}, nil
	}
	if err != nil {
		return Mark{}, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var crc uint32
	var read int64
	lastStart := int64(0) // where the prefix's last line begins
	var end byte          // the prefix's last byte
	for read < m.Size {
		n, err := f.Read(buf[:min(int64(len(buf)), m.Size-read)])
		if n > 0 {
			b := buf[:n]
			crc = crc32.Update(crc, castagnoli(), b)
			// A newline starts a line, unless it is the prefix's own last byte.
			look := b
			if read+int64(n) == m.Size {
				look = b[:n-1]
			}
			if i := bytes.LastIndexByte(look, '\n'); i >= 0 {
				lastStart = read + int64(i) + 1
			}
			end = b[n-1]
			read += int64(n)
		}
		if err == io.EOF {
			return Mark{}, nil // shorter than the prefix: cut back
		}
		if err != nil {
			return Mark{}, fmt.Errorf("read journal: %w", err)
		}
	}
	if crc != m.CRC || end != '\n' {
		return Mark{}, nil
	}
	head := make([]byte, len(crcPrefix))
	if _, err := f.ReadAt(head, lastStart); err != nil && err != io.EOF {
		return Mark{}, fmt.Errorf("read journal: %w", err)
	}
	m.checksummed = bytes.Equal(head, []byte(crcPrefix))
	return m, nil
}
