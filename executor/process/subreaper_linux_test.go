package process

import (
	"testing"

	"golang.org/x/sys/unix"
)

// unsetSubreaper undoes BecomeSubreaper, so that later tests run as before.
func unsetSubreaper(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		t.Error(err)
	}
}
