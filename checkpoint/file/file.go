// Package file is the checkpoint.Store of a local directory: each object is a data file and a
// small JSON manifest beside it; the manifest's rename commits the object.
package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
)

const manifestSuffix = ".rbmeta"

// dirMode keeps checkpoints their owner's (the umask aside): they hold the model and its data.
// Objects are written as temporary files, which are 0600.
const dirMode = 0o700

// Store keeps objects under Root.
type Store struct {
	Root string
}

var _ checkpoint.Store = (*Store)(nil)

// Location is the store's root directory (checkpoint.Locator).
func (s *Store) Location() string { return s.Root }

// New returns a store rooted at dir, creating it.
func New(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("create checkpoint dir: %w", err)
	}
	return &Store{Root: dir}, nil
}

func (s *Store) paths(key string) (data, manifest string, err error) {
	if err := checkpoint.CheckKey(key); err != nil {
		return "", "", err
	}
	if strings.HasSuffix(key, manifestSuffix) {
		return "", "", fmt.Errorf("%w: %q ends in %s", checkpoint.ErrBadKey, key, manifestSuffix)
	}
	data = filepath.Join(s.Root, filepath.FromSlash(key))
	return data, data + manifestSuffix, nil
}

// Put writes the data to a temporary file, syncs and renames it, then does the same for the
// manifest: the object exists once its manifest does, and the manifest names the data's hash.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (checkpoint.Info, error) {
	data, manifest, err := s.paths(key)
	if err != nil {
		return checkpoint.Info{}, err
	}
	if err := os.MkdirAll(filepath.Dir(data), dirMode); err != nil {
		return checkpoint.Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	hr := &checkpoint.HashingReader{R: r}
	if err := writeAtomic(data, false, func(w io.Writer) error { _, err := io.Copy(w, readerCtx{ctx, hr}); return err }); err != nil {
		return checkpoint.Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	info := checkpoint.Info{Key: key, Size: hr.Size, SHA256: hr.Sum(), Modified: time.Now().UTC()}
	// One directory sync after both renames makes both entries durable (same directory).
	if err := writeAtomic(manifest, true, func(w io.Writer) error { return json.NewEncoder(w).Encode(info) }); err != nil {
		return checkpoint.Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	return info, nil
}

// Open returns a verifying reader of the object.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, checkpoint.Info, error) {
	data, manifest, err := s.paths(key)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	info, err := readManifest(manifest)
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("open %s: %w", key, err)
	}
	f, err := os.Open(data)
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("open %s: %w", key, err)
	}
	return checkpoint.VerifyingReader(f, info.SHA256), info, nil
}

// List walks the root for manifests under the prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]checkpoint.Info, error) {
	var out []checkpoint.Info
	// Walk only below the prefix's directory: listing one trial must not read every trial's.
	start := s.Root
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		if checkpoint.CheckKey(prefix[:i]) != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, checkpoint.ErrBadKey)
		}
		start = filepath.Join(s.Root, filepath.FromSlash(prefix[:i]))
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, manifestSuffix) {
			return nil
		}
		rel, err := filepath.Rel(s.Root, strings.TrimSuffix(p, manifestSuffix))
		if err != nil || !strings.HasPrefix(filepath.ToSlash(rel), prefix) {
			return nil
		}
		info, err := readManifest(p)
		if err != nil {
			return nil // a manifest being replaced: the object is listed once it is whole
		}
		out = append(out, info)
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes the manifest first (the object is gone from then on), then the data.
func (s *Store) Delete(ctx context.Context, key string) error {
	data, manifest, err := s.paths(key)
	if err != nil {
		return err
	}
	for _, p := range []string{manifest, data} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	return nil
}

func readManifest(p string) (checkpoint.Info, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return checkpoint.Info{}, err
	}
	var info checkpoint.Info
	if err := json.Unmarshal(b, &info); err != nil {
		return checkpoint.Info{}, fmt.Errorf("manifest %s: %w", p, err)
	}
	return info, nil
}

// writeAtomic writes a file through a synced temporary file and a rename, then, with syncDir,
// syncs the directory so that the rename itself survives a crash.
func writeAtomic(dst string, syncDir bool, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return err
	}
	if !syncDir {
		return nil
	}
	d, err := os.Open(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readerCtx stops a copy when its context ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
