package codebundle

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
)

// ErrBadBundle matches every bundle Unpack refuses: not a tar.gz, a hostile entry, over a cap,
// or not the ID it was sent as.
var ErrBadBundle = errors.New("bad code bundle")

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadBundle, fmt.Sprintf(format, args...))
}

// Unpack writes the bundle read from r into dst (made if missing, and empty: its files are the
// bundle's), within lim, and returns its manifest (its ID computed from what it wrote). Only
// regular files and folders are accepted, by relative names inside dst; everything is written
// through an os.Root of dst, so no entry reaches outside it. On error dst may hold part of the
// bundle: the caller removes it.
func Unpack(r io.Reader, dst string, lim Limits) (*Manifest, error) {
	lim = lim.orDefault()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, bad("not gzip: %v", err)
	}
	zr.Multistream(false)
	tr := tar.NewReader(zr)
	m := &Manifest{Dir: dst}
	seen := map[string]bool{}
	entries := 0 // files and folders: a bundle of a million empty folders is refused too
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bad("read tar: %v", err)
		}
		name := cleanName(hdr.Name)
		if name == "" {
			return nil, bad("entry %q is not a relative path inside the folder", hdr.Name)
		}
		if entries++; entries > 2*lim.MaxFiles {
			return nil, bad("more than %d entries", 2*lim.MaxFiles)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return nil, bad("make %s: %v", name, err)
			}
			continue
		case tar.TypeReg:
		default:
			return nil, bad("entry %s is not a file or a folder (type %q): links and devices are not accepted", name, hdr.Typeflag)
		}
		if seen[name] {
			return nil, bad("entry %s appears twice", name)
		}
		seen[name] = true
		if len(m.Files)+1 > lim.MaxFiles {
			return nil, bad("more than %d files", lim.MaxFiles)
		}
		if hdr.Size < 0 || m.Bytes+hdr.Size > lim.MaxBytes {
			return nil, bad("more than %s of files", HumanSize(lim.MaxBytes))
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return nil, bad("make %s: %v", dir, err)
			}
		}
		exec := hdr.Mode&0o111 != 0
		mode := os.FileMode(0o644)
		if exec {
			mode = 0o755
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return nil, bad("write %s: %v", name, err)
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(tr, hdr.Size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
		if n != hdr.Size {
			return nil, bad("entry %s is cut short", name)
		}
		m.Files = append(m.Files, File{Path: name, Exec: exec, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		m.Bytes += n
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	m.SHA256 = ID(m.Files)
	return m, nil
}

// UnpackAs is Unpack of a bundle sent as id: one whose files hash to another ID is refused.
func UnpackAs(r io.Reader, dst, id string, lim Limits) (*Manifest, error) {
	m, err := Unpack(r, dst, lim)
	if err != nil {
		return nil, err
	}
	if m.SHA256 != id {
		return nil, bad("its files hash to %s, not to %s as it was sent", m.SHA256, id)
	}
	return m, nil
}
