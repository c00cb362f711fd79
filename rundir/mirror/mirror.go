package mirror

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Store holds copies of run directories: each run's files by their slash-separated names
// relative to its directory. A file is either written whole (Put) or grown (Append at its
// length). Implementations are safe for concurrent use, by several processes at once.
//
// Errors: Append returns an error matching ErrConflict when offset is not the file's length
// (another writer got there first: nothing is written); Read returns one matching
// fs.ErrNotExist for a file the run lacks; an invalid run or name matches ErrInvalid; any other
// error is the store failing, and the call may be retried.
type Store interface {
	// Put replaces the file with data.
	Put(ctx context.Context, run, name string, data []byte) error
	// Append adds data at the end of the file, which must be offset bytes long (0: a new file).
	Append(ctx context.Context, run, name string, offset int64, data []byte) error
	// Read returns the file's bytes from offset to its end (none when offset is past it).
	Read(ctx context.Context, run, name string, offset int64) ([]byte, error)
	// List returns the run's files, sorted by name (none for a run it does not hold).
	List(ctx context.Context, run string) ([]File, error)
	// Delete removes the file; a file that is not there is no error.
	Delete(ctx context.Context, run, name string) error
}

// File is one file of a run in a Store.
type File struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

var (
	// ErrConflict: an Append at an offset that is not the file's length.
	ErrConflict = errors.New("the mirror's copy has moved on")
	// ErrInvalid: a run or file name that is not a clean relative path.
	ErrInvalid = errors.New("invalid name")
)

// CheckName checks a run key or a file name: a clean, relative, slash-separated path of at most
// 512 bytes with no "." or ".." element. Stores call it first, so that no name escapes a folder.
func CheckName(what, name string) error {
	if name == "" || len(name) > 512 || strings.ContainsAny(name, "\\\x00") || path.IsAbs(name) || path.Clean(name) != name {
		return fmt.Errorf("%s %q: %w", what, name, ErrInvalid)
	}
	for _, el := range strings.Split(name, "/") {
		if el == "." || el == ".." {
			return fmt.Errorf("%s %q: %w", what, name, ErrInvalid)
		}
	}
	return nil
}
