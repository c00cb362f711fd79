package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// RunFiles is the database as a mirror of the runs' state directories: a file is its rows in
// run_chunks (each Append one, a Put one at 0), its length in run_files. Appends are a
// compare-and-set on that length, so two writers at one offset never both land.
type RunFiles struct{ s *Store }

var _ mirror.Store = RunFiles{}

// RunFiles returns the store's mirror of run directories.
func (s *Store) RunFiles() RunFiles { return RunFiles{s} }

func checkFile(run, name string) error {
	if err := mirror.CheckName("run", run); err != nil {
		return err
	}
	return mirror.CheckName("file", name)
}

// Put replaces the file's chunks with one.
func (f RunFiles) Put(ctx context.Context, run, name string, data []byte) error {
	if err := checkFile(run, name); err != nil {
		return err
	}
	s := f.s
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q("DELETE FROM run_chunks WHERE run = ? AND name = ?"), run, name); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO run_files (run, name, size) VALUES (?, ?, ?)
			ON CONFLICT (run, name) DO UPDATE SET size = excluded.size`), run, name, len(data)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q("INSERT INTO run_chunks (run, name, at, data) VALUES (?, ?, 0, ?)"), run, name, nonNil(data))
		return err
	})
	return s.fail(fmt.Sprintf("put %s/%s", run, name), err)
}

// Append adds a chunk at offset if the file is offset bytes long.
func (f RunFiles) Append(ctx context.Context, run, name string, offset int64, data []byte) error {
	if err := checkFile(run, name); err != nil {
		return err
	}
	s := f.s
	op := fmt.Sprintf("append to %s/%s at %d", run, name, offset)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var size int64
		err := tx.QueryRowContext(ctx, s.q("SELECT size FROM run_files WHERE run = ? AND name = ?"+s.d.forUpdate), run, name).Scan(&size)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if offset != 0 {
				return fmt.Errorf("%s: it is not there: %w", op, mirror.ErrConflict)
			}
			_, err = tx.ExecContext(ctx, s.q("INSERT INTO run_files (run, name, size) VALUES (?, ?, ?)"), run, name, len(data))
		case err != nil:
			return err
		case size != offset:
			return fmt.Errorf("%s: it holds %d bytes: %w", op, size, mirror.ErrConflict)
		default:
			_, err = tx.ExecContext(ctx, s.q("UPDATE run_files SET size = ? WHERE run = ? AND name = ?"), offset+int64(len(data)), run, name)
		}
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, s.q("INSERT INTO run_chunks (run, name, at, data) VALUES (?, ?, ?, ?)"), run, name, offset, data)
		return err
	})
	if errors.Is(err, mirror.ErrConflict) {
		return err
	}
	if errors.Is(s.d.constraint(err), store.ErrExists) { // another writer made the file first
		return fmt.Errorf("%s: another writer made it: %w", op, mirror.ErrConflict)
	}
	return s.fail(op, err)
}

// Read joins the chunks that reach past offset.
func (f RunFiles) Read(ctx context.Context, run, name string, offset int64) ([]byte, error) {
	if err := checkFile(run, name); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("read %s/%s at %d: %w", run, name, offset, mirror.ErrInvalid)
	}
	s := f.s
	op := fmt.Sprintf("read %s/%s", run, name)
	var out []byte
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var size int64
		if err := tx.QueryRowContext(ctx, s.q("SELECT size FROM run_files WHERE run = ? AND name = ?"), run, name).Scan(&size); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.q("SELECT at, data FROM run_chunks WHERE run = ? AND name = ? AND at + length(data) > ? ORDER BY at"), run, name, offset)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = make([]byte, 0, max(size-offset, 0))
		for rows.Next() {
			var (
				at   int64
				data []byte
			)
			if err := rows.Scan(&at, &data); err != nil {
				return err
			}
			if at < offset {
				data = data[offset-at:]
			}
			out = append(out, data...)
		}
		return rows.Err()
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", op, fs.ErrNotExist)
	}
	return out, s.fail(op, err)
}

// List reads run_files.
func (f RunFiles) List(ctx context.Context, run string) ([]mirror.File, error) {
	if err := mirror.CheckName("run", run); err != nil {
		return nil, err
	}
	s := f.s
	rows, err := s.db.QueryContext(ctx, s.q("SELECT name, size FROM run_files WHERE run = ? ORDER BY name"), run)
	if err != nil {
		return nil, s.fail("list "+run, err)
	}
	defer rows.Close()
	var out []mirror.File
	for rows.Next() {
		var file mirror.File
		if err := rows.Scan(&file.Name, &file.Size); err != nil {
			return nil, s.fail("list "+run, err)
		}
		out = append(out, file)
	}
	return out, s.fail("list "+run, rows.Err())
}

// Delete removes the file's rows.
func (f RunFiles) Delete(ctx context.Context, run, name string) error {
	if err := checkFile(run, name); err != nil {
		return err
	}
	s := f.s
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.q("DELETE FROM run_chunks WHERE run = ? AND name = ?"), run, name); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q("DELETE FROM run_files WHERE run = ? AND name = ?"), run, name)
		return err
	})
	return s.fail(fmt.Sprintf("delete %s/%s", run, name), err)
}

// nonNil keeps an empty file's chunk a value, not NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

var _ mirror.OpenDB = OpenRunFiles

// OpenRunFiles opens the database at url for its mirror of run directories alone (a server's
// driver, told where by mirror.EnvAt); the function it returns closes the database.
func OpenRunFiles(ctx context.Context, url string) (mirror.Store, func(), error) {
	st, err := Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	return st.RunFiles(), func() { st.Close() }, nil
}
