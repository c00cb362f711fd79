package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strings"
	"time"
)

// Store keeps objects under slash-separated keys.
//
// Error contract: a missing key is fs.ErrNotExist (check with errors.Is); a key that is empty,
// absolute, or holds "." or ".." segments is ErrBadKey; content that does not match its recorded
// sha256 is ErrCorrupt, returned by the reader's last Read. Other errors are the backend's,
// wrapped.
type Store interface {
	// Put stores r's content under key atomically, replacing what was there: once it returns
	// nil, Open returns all of it; if it fails or the process dies, Open returns the old object
	// or nothing, never a part.
	Put(ctx context.Context, key string, r io.Reader) (Info, error)
	// Open returns a reader of the object, which fails with ErrCorrupt at its end when the
	// content does not match the sha256 recorded at Put.
	Open(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// List returns the objects whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes an object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// Locator is implemented by stores that can say where they keep their objects (a directory, an
// s3:// URL): what an infrastructure fault of theirs names (internal/infra).
type Locator interface {
	Location() string
}

// locationOf is where s keeps its objects, "" when it does not say.
func locationOf(s Store) string {
	if l, ok := s.(Locator); ok {
		return l.Location()
	}
	return ""
}

// Info describes a stored object.
type Info struct {
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"`
	Modified time.Time `json:"modified"`
}

// Errors of the Store contract.
var (
	ErrCorrupt = errors.New("checkpoint corrupt: content does not match its sha256")
	ErrBadKey  = errors.New("bad checkpoint key")
)

// CheckKey enforces the key rules every backend shares, so that no key escapes the store's root
// or prefix.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		return fmt.Errorf("%w: %q", ErrBadKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q", ErrBadKey, key)
		}
	}
	if path.Clean(key) != key {
		return fmt.Errorf("%w: %q", ErrBadKey, key)
	}
	return nil
}

// VerifyingReader passes r through and fails with ErrCorrupt at EOF when what was read does not
// hash to want. Backends wrap their object readers in it.
func VerifyingReader(r io.ReadCloser, want string) io.ReadCloser {
	return &verifier{r: r, h: sha256.New(), want: want}
}

type verifier struct {
	r    io.ReadCloser
	h    hash.Hash
	want string
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(v.h.Sum(nil)) != v.want {
		return n, ErrCorrupt
	}
	return n, err
}

func (v *verifier) Close() error { return v.r.Close() }

// HashingReader hashes what is read through it; Sum gives the hex sha256 so far.
type HashingReader struct {
	R    io.Reader
	h    hash.Hash
	Size int64
}

func (h *HashingReader) Read(p []byte) (int, error) {
	if h.h == nil {
		h.h = sha256.New()
	}
	n, err := h.R.Read(p)
	h.h.Write(p[:n])
	h.Size += int64(n)
	return n, err
}

// Sum is the hex sha256 of what was read.
func (h *HashingReader) Sum() string {
	if h.h == nil {
		h.h = sha256.New()
	}
	return hex.EncodeToString(h.h.Sum(nil))
}
