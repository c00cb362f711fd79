package executor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

)

// Journal is the append-only, fsynced record of a run. Decisions are synced before Append
// returns; results noted with Note are written at once (a driver that dies keeps them) and synced
// by a group commit within GroupCommit (a machine that dies may lose that much, and those trials
// are rerun from their checkpoints).
type Journal struct {
	mu    sync.Mutex
	f     *os.File
	dirty bool
	stop  chan struct{}
	done  chan struct{}
}

// GroupCommit is the longest a noted event waits for its sync.
const GroupCommit = 100 * time.Millisecond

// OpenJournal opens (or creates) a journal and returns the events already in it. A torn last
// line, left by a crash in mid-write, is dropped.
func OpenJournal(path string) (*Journal, []Event, error) {
	events, good, err := readJournal(path)
	if err != nil {
		return nil, nil, err
	}
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	// Drop a torn tail so that the next event starts on a line of its own.
	if err := w.Truncate(good); err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	if _, err := w.Seek(good, 0); err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	j := &Journal{f: w, stop: make(chan struct{}), done: make(chan struct{})}
	go j.flusher()
	return j, events, nil
}

// Append writes one event and syncs it to disk before returning.
func (j *Journal) Append(e Event) error { return j.append(e, true) }

// Note writes one event and leaves its sync to the group commit: for results and progress.
func (j *Journal) Note(e Event) error { return j.append(e, false) }

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
			if j.dirty {
				j.f.Sync()
				j.dirty = false
			}
			j.mu.Unlock()
		}
	}
}

func (j *Journal) append(e Event, sync bool) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if !sync {
		j.dirty = true
		return nil
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.dirty = false
	return nil
}

// Sync makes everything written so far durable.
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.dirty = false
	return nil
}

// Close syncs what is pending and closes the journal file.
func (j *Journal) Close() error {
	close(j.stop)
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.f.Sync(); err != nil {
		j.f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	return j.f.Close()
}

// ReadJournal returns a journal's whole events without touching the file: what `status` and
// `report` read while a driver may still be writing.
func ReadJournal(path string) ([]Event, error) {
	events, _, err := readJournal(path)
	return events, err
}

// readJournal returns the events and the length of the file up to the last whole one.
func readJournal(path string) ([]Event, int64, error) {
	var events []Event
	good := int64(0)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // EOF, possibly after a torn line without its newline
		}
		var e Event
		if json.Unmarshal(line, &e) != nil {
			break
		}
		events = append(events, e)
		good += int64(len(line))
	}
	return events, good, nil
}
