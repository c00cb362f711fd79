// Package logcap is a log file whose size is bounded: the output of a trainer (or a driver) that
// writes without end cannot fill the disk that a run, and every other run beside it, stands on.
package logcap

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// DefaultMax is the bound of one log file when none is given: 64 MiB, twice that on disk with
// its one rotated part.
const DefaultMax = 64 << 20

// File appends to the log at a path, at most Max bytes per file: a write that would pass it
// moves the file to PATH.1 (replacing the part rotated before) and starts PATH afresh with a
// line saying so. The log takes at most twice Max on disk, and its newest output is kept. A
// single write larger than Max is cut to its last Max bytes, which is said too. Writes from
// several goroutines are serialized.
type File struct {
	mu      sync.Mutex
	path    string
	max     int64
	mode    os.FileMode
	f       *os.File
	size    int64
	rotated int
	err     error
}

// Open opens (or creates, with mode) the log at path for appending, bounded at max bytes
// (DefaultMax when max <= 0).
func Open(path string, max int64, mode os.FileMode) (*File, error) {
	if max <= 0 {
		max = DefaultMax
	}
	l := &File{path: path, max: max, mode: mode}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *File) open() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, l.mode)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write appends p, rotating first when p would take the file past its bound. It reports p
// written whole even when part of it was cut, so that a writer copying a process's output goes
// on (and the process is not stopped by a broken pipe); an error is that of the file.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	n := len(p)
	if l.size+int64(len(p)) > l.max {
		cut := 0
		if int64(len(p)) > l.max/2 { // more than half a file at once: only its end is kept
			cut = len(p) - int(l.max/2)
			p = p[cut:]
		}
		if err := l.rotate(cut); err != nil {
			l.err = err
			return 0, err
		}
	}
	w, err := l.f.Write(p)
	l.size += int64(w)
	if err != nil {
		return w, err
	}
	return n, nil
}

// rotate moves the file to PATH.1 and starts it again with a line saying why (and how many bytes
// of the write at hand were cut).
func (l *File) rotate(cut int) error {
	if err := l.f.Close(); err != nil {
		return err
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	if err := l.open(); err != nil {
		return err
	}
	l.rotated++
	msg := fmt.Sprintf("=== rubberband %s: this log reached its bound of %d bytes (rotation %d): the output before is in %s.1, and older output was dropped",
		time.Now().UTC().Format(time.RFC3339), l.max, l.rotated, l.path)
	if cut > 0 {
		msg += fmt.Sprintf("; the next write was cut to its last %d bytes (%d dropped)", l.max/2, cut)
	}
	w, err := l.f.WriteString(msg + "\n")
	l.size += int64(w)
	return err
}

// Close closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = os.ErrClosed
	}
	return l.f.Close()
}
