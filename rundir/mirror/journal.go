package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// JournalFile is what a journal writes to (journal.JournalFile's methods).
type JournalFile interface {
	Write(b []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// appendTimeout bounds one copy of the journal's new records.
const appendTimeout = 30 * time.Second

// JournalWrap returns what wraps the journal file at localPath (name in the store) so that each
// of its syncs appends what was written since the last to the store before it returns. What
// the local file holds beyond the store's copy (records a driver wrote and died before copying)
// goes with the first sync; a local file that is not the store's copy and more fails here:
// restore the directory first (Restore).
func JournalWrap(ctx context.Context, s Store, run, name, localPath string) (func(JournalFile) JournalFile, error) {
	local, err := os.ReadFile(localPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("mirror the journal: %w", err)
	}
	remote, err := s.Read(ctx, run, name, 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("mirror the journal: %w", err)
	}
	if !bytes.HasPrefix(local, remote) {
		return nil, fmt.Errorf("mirror the journal: %s (%d bytes) is not the mirror's copy (%d bytes) and more: restore the run's directory from the mirror first",
			localPath, len(local), len(remote))
	}
	base, pending := int64(len(remote)), bytes.Clone(local[len(remote):])
	return func(f JournalFile) JournalFile {
		return &journalFile{JournalFile: f, ctx: context.WithoutCancel(ctx), store: s, run: run, name: name, base: base, pending: pending}
	}, nil
}

// journalFile copies what is written to its file to the store at each sync.
type journalFile struct {
	JournalFile
	ctx       context.Context
	store     Store
	run, name string
	base      int64  // the store's copy's length
	pending   []byte // written here, not yet in the store
}

func (j *journalFile) Write(b []byte) (int, error) {
	n, err := j.JournalFile.Write(b)
	j.pending = append(j.pending, b[:n]...)
	return n, err
}

func (j *journalFile) Truncate(size int64) error {
	if size < j.base {
		return fmt.Errorf("cut the journal to %d bytes: the mirror holds %d already", size, j.base)
	}
	if err := j.JournalFile.Truncate(size); err != nil {
		return err
	}
	if keep := size - j.base; keep < int64(len(j.pending)) {
		j.pending = j.pending[:keep]
	}
	return nil
}

func (j *journalFile) Sync() error {
	if err := j.JournalFile.Sync(); err != nil {
		return err
	}
	if len(j.pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(j.ctx, appendTimeout)
	defer cancel()
	if err := j.store.Append(ctx, j.run, j.name, j.base, j.pending); err != nil {
		return fmt.Errorf("mirror the journal: %w", err)
	}
	j.base += int64(len(j.pending))
	j.pending = j.pending[:0]
	return nil
}

var _ io.Writer = (*journalFile)(nil)
