package codebundle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Key is where a run's checkpoint store keeps bundle id, under the run's own prefix: remote
// workers fetch it from there.
func Key(id string) string { return "code/" + id + ".tar.gz" }

// Cached is the folder cache/id holding bundle id unpacked, made from open's bundle the first
// time on this node: every later launch of the run (any trial, any rank) finds it there. Two
// workers unpacking at once each write a folder of their own and the first rename wins.
func Cached(cache, id string, lim Limits, open func() (io.ReadCloser, error)) (string, error) {
	if !ValidID(id) {
		return "", bad("%q is not a bundle ID", id)
	}
	dst := filepath.Join(cache, id)
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		return dst, nil
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, ".unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	r, err := open()
	if err != nil {
		return "", fmt.Errorf("fetch code %s: %w", id, err)
	}
	_, err = UnpackAs(r, filepath.Join(tmp, "code"), id, lim)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("unpack code %s: %w", id, err)
	}
	if err := os.Rename(filepath.Join(tmp, "code"), dst); err != nil {
		if st, serr := os.Stat(dst); serr == nil && st.IsDir() {
			return dst, nil // another worker's, the same files
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return dst, nil
}
