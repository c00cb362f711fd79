package infra

import (
	"fmt"
	"syscall"
)

// FullBelow is the free space under which a file system counts as full: no trainer writes its
// checkpoint in less.
const FullBelow = 1 << 20

// Full says, as an *Error, that the file system holding dir has less than FullBelow bytes left
// to an unprivileged writer: what a trainer that failed there most likely met (its own write of
// a checkpoint refused with ENOSPC). nil when there is room, or when it cannot tell.
func Full(dir string) *Error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil
	}
	if free := st.Bavail * uint64(st.Bsize); free < FullBelow {
		return &Error{What: DiskFull, Where: dir, Err: fmt.Errorf("%d bytes left (%w)", free, syscall.ENOSPC)}
	}
	return nil
}
