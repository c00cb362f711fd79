// Package infra tells a fault of the infrastructure a run stands on (a full disk, a checkpoint
// store that is down or refuses writes, a journal that cannot be written) from a trainer's own
// failure: the first pauses a run and spends none of its tries, the second is what retries are
// for. The runtimes and the checkpoint code classify their errors with Classify; the executor
// (infra.Error) acts on them.
package infra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"syscall"
)

// What a fault is, as the words Error.What uses.
const (
	DiskFull      = "disk full"
	QuotaExceeded = "disk quota exceeded"
	ReadOnly      = "file system read-only"
	StoreDown     = "checkpoint store unreachable"
	JournalBroken = "journal cannot be written"
	Forbidden     = "forbidden by the cluster's RBAC" // a Kubernetes request the driver's Role does not allow
)

// Error is an infrastructure fault: What is wrong (one of the words above), Where (a path, a
// URL), and the error that showed it.
type Error struct {
	What  string
	Where string
	Err   error
}

func (e *Error) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("%s: %v", e.What, e.Err)
	}
	return fmt.Sprintf("%s at %s: %v", e.What, e.Where, e.Err)
}

// Unwrap returns the error that showed the fault.
func (e *Error) Unwrap() error { return e.Err }

// unavailable is implemented by a store's errors that know whether the store could not be
// reached (checkpoint/s3's RetryError: it gave up retrying a transient failure).
type unavailable interface{ Unavailable() bool }

// Classify returns err as an *Error when it is an infrastructure fault, else err itself (nil for
// nil): ENOSPC, EDQUOT and EROFS anywhere in its chain, a store that gave up on a transient
// failure, a network error. where names the place when the error carries no path of its own
// (a *fs.PathError's directory is used when it does). An *Error is returned as it is.
func Classify(err error, where string) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // a context's errors are net.Errors too, and no fault
	}
	what := ""
	switch {
	case errors.Is(err, syscall.ENOSPC):
		what = DiskFull
	case errors.Is(err, syscall.EDQUOT):
		what = QuotaExceeded
	case errors.Is(err, syscall.EROFS):
		what = ReadOnly
	}
	if what != "" {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path != "" {
			where = filepath.Dir(pe.Path)
		}
		return &Error{What: what, Where: where, Err: err}
	}
	var down unavailable
	var netErr net.Error
	if (errors.As(err, &down) && down.Unavailable()) || errors.As(err, &netErr) || errors.Is(err, syscall.ECONNREFUSED) {
		return &Error{What: StoreDown, Where: where, Err: err}
	}
	return err
}

// Is says whether err is an infrastructure fault, and which.
func Is(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
