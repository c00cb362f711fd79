package checkpoint

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/rubberband-hpo/rubberband/internal/infra"
)

// Keep is how many checkpoint versions a trial keeps: the newest, and the one before in case the
// newest turns out corrupt.
const Keep = 2

func trialPrefix(trial string) string { return "trials/" + trial + "/" }

// SaveDir stores the files of dir as the trial's newest checkpoint version and deletes all but
// the last Keep versions. A store that is full, read-only or unreachable is an *infra.Error
// naming it: no fault of the trainer's.
func SaveDir(ctx context.Context, s Store, trial, dir string) (Info, error) {
	info, err := saveDir(ctx, s, trial, dir)
	return info, infra.Classify(err, locationOf(s))
}

func saveDir(ctx context.Context, s Store, trial, dir string) (Info, error) {
	versions, err := s.List(ctx, trialPrefix(trial))
	if err != nil {
		return Info{}, fmt.Errorf("save checkpoint of %s: %w", trial, err)
	}
	seq := 1
	if n := len(versions); n > 0 {
		fmt.Sscanf(filepath.Base(versions[n-1].Key), "%08d", &seq)
		seq++
	}
	key := fmt.Sprintf("%s%08d.tar", trialPrefix(trial), seq)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, dir)) }()
	info, err := s.Put(ctx, key, pr)
	pr.CloseWithError(err)
	if err != nil {
		return Info{}, fmt.Errorf("save checkpoint of %s: %w", trial, err)
	}
	versions = append(versions, info)
	for _, old := range versions[:max(0, len(versions)-Keep)] {
		if err := s.Delete(ctx, old.Key); err != nil {
			return info, fmt.Errorf("prune checkpoint of %s: %w", trial, err)
		}
	}
	return info, nil
}

// Restored says which version RestoreDir used and which newer ones it had to skip.
type Restored struct {
	Info    Info
	Skipped []error
}

// RestoreDir replaces dir with the trial's newest intact checkpoint. A corrupt version is
// reported in Skipped and the previous one is tried. ok is false when the trial has no intact
// checkpoint; dir is then empty.
func RestoreDir(ctx context.Context, s Store, trial, dir string) (r Restored, ok bool, err error) {
	return restoreDir(ctx, s, trial, dir, "")
}

// RestoreDirBefore is RestoreDir among the versions older than the one whose key is given: for a
// worker that restored a version its own gang saved meanwhile (another worker ran ahead) and needs
// the one the gang started from.
func RestoreDirBefore(ctx context.Context, s Store, trial, dir, key string) (r Restored, ok bool, err error) {
	return restoreDir(ctx, s, trial, dir, key)
}

// restoreDir restores the newest intact version whose key sorts before before (any, when empty).
// A store that cannot be reached, or a dir whose disk is full, is an *infra.Error.
func restoreDir(ctx context.Context, s Store, trial, dir, before string) (Restored, bool, error) {
	r, ok, err := restoreDirOnce(ctx, s, trial, dir, before)
	return r, ok, infra.Classify(err, locationOf(s))
}

func restoreDirOnce(ctx context.Context, s Store, trial, dir, before string) (r Restored, ok bool, err error) {
	versions, err := s.List(ctx, trialPrefix(trial))
	if err != nil {
		return r, false, fmt.Errorf("restore checkpoint of %s: %w", trial, err)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i].Key > versions[j].Key })
	for _, v := range versions {
		if before != "" && v.Key >= before {
			continue
		}
		tmp := dir + ".restoring"
		os.RemoveAll(tmp)
		err := extract(ctx, s, v.Key, tmp)
		if errors.Is(err, ErrCorrupt) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, tar.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) {
			r.Skipped = append(r.Skipped, fmt.Errorf("%s: %w", v.Key, err))
			os.RemoveAll(tmp)
			continue
		}
		if err != nil {
			os.RemoveAll(tmp)
			return r, false, fmt.Errorf("restore checkpoint of %s: %w", trial, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			return r, false, fmt.Errorf("restore checkpoint of %s: %w", trial, err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			return r, false, fmt.Errorf("restore checkpoint of %s: %w", trial, err)
		}
		r.Info = v
		return r, true, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return r, false, err
	}
	return r, false, os.MkdirAll(dir, 0o755)
}

func extract(ctx context.Context, s Store, key, dir string) error {
	rc, _, err := s.Open(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	err = untar(rc, dir)
	if _, rest := io.Copy(io.Discard, rc); rest != nil { // the end is where the sha256 is checked
		if errors.Is(rest, ErrCorrupt) || err == nil {
			return rest // a damaged archive is reported by its cause: the checksum
		}
	}
	return err
}

func untar(rc io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) || h.Typeflag != tar.TypeReg {
			return fmt.Errorf("%w: entry %q", tar.ErrHeader, h.Name)
		}
		p := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func writeTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	// Everything is read through an os.Root of dir: the directory may belong to a sandboxed
	// trainer still running, and a link it swaps in, a file's or a folder's, never takes the
	// reading (the driver's, maybe root's) outside dir.
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return tw.Close() // no checkpoint written yet: an empty version
	}
	if err != nil {
		return err
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil // replaced by something else since it was listed
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: info.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = io.Copy(tw, io.LimitReader(f, info.Size()))
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
