package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/rubberband-hpo/rubberband/internal/safefile"
)

// Dir is a Store in a folder (a disk every server mounts: NFS, EFS): ROOT/RUN/NAME, written
// durably. A lock file per run (flock) makes each change atomic among processes.
type Dir struct {
	Root string
}

var _ Store = (*Dir)(nil)

// lockName is the per-run lock file; List leaves it out.
const lockName = ".mirror-lock"

func (d *Dir) path(run, name string) (string, error) {
	if err := CheckName("run", run); err != nil {
		return "", err
	}
	if err := CheckName("file", name); err != nil {
		return "", err
	}
	if name == lockName {
		return "", fmt.Errorf("file %q: reserved: %w", name, ErrInvalid)
	}
	return filepath.Join(d.Root, filepath.FromSlash(run), filepath.FromSlash(name)), nil
}

// locked runs fn holding the run's lock, its folder made.
func (d *Dir) locked(run string, fn func() error) error {
	dir := filepath.Join(d.Root, filepath.FromSlash(run))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("mirror: lock %s: %w", run, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return fn()
}

// change runs fn on the file's path holding the run's lock, its folder made.
func (d *Dir) change(run, name string, fn func(path string) error) error {
	p, err := d.path(run, name)
	if err != nil {
		return err
	}
	return d.locked(run, func() error {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		return fn(p)
	})
}

// Put replaces the file, atomically.
func (d *Dir) Put(ctx context.Context, run, name string, data []byte) error {
	return d.change(run, name, func(p string) error { return safefile.Write(p, data, 0o600) })
}

// Append grows the file at offset, fsynced.
func (d *Dir) Append(ctx context.Context, run, name string, offset int64, data []byte) error {
	return d.change(run, name, func(p string) error {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		if info.Size() != offset {
			return fmt.Errorf("append to %s/%s at %d: it holds %d bytes: %w", run, name, offset, info.Size(), ErrConflict)
		}
		if _, err := f.WriteAt(data, offset); err != nil {
			f.Truncate(offset) // nothing half-written stays
			return fmt.Errorf("mirror: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		if offset == 0 {
			return safefile.SyncDir(filepath.Dir(p))
		}
		return nil
	})
}

// Read returns the file from offset.
func (d *Dir) Read(ctx context.Context, run, name string, offset int64) ([]byte, error) {
	p, err := d.path(run, name)
	if err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("read %s/%s at %d: %w", run, name, offset, ErrInvalid)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	return b, nil
}

// List walks the run's folder.
func (d *Dir) List(ctx context.Context, run string) ([]File, error) {
	if err := CheckName("run", run); err != nil {
		return nil, err
	}
	root := filepath.Join(d.Root, filepath.FromSlash(run))
	var out []File
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipAll
			}
			return err
		}
		if !e.Type().IsRegular() || (filepath.Dir(p) == root && e.Name() == lockName) || isTemp(e.Name()) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, File{Name: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mirror: list %s: %w", run, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes the file.
func (d *Dir) Delete(ctx context.Context, run, name string) error {
	return d.change(run, name, func(p string) error {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("mirror: %w", err)
		}
		return nil
	})
}
