//go:build !linux

package process

import (
	"errors"
	"fmt"
)

// BecomeSubreaper needs Linux (prctl PR_SET_CHILD_SUBREAPER): elsewhere it does nothing and says
// so; what workers leave behind is then not found either.
func BecomeSubreaper() error {
	return fmt.Errorf("become a child subreaper: %w", errUnsupported)
}

var errUnsupported = errors.New("needs Linux (prctl and /proc)")

type procStat struct {
	pid, ppid, pgid int
	state           byte
	start           uint64
	comm            string
}

func (s procStat) dead() bool { return s.state == 'Z' || s.state == 'X' }

func readStat(int) (procStat, error) { return procStat{}, errUnsupported }
func tokenOf(int) string             { return "" }
func processes() ([]procStat, error) { return nil, errUnsupported }
func bootID() (string, error)        { return "", errUnsupported }
func killSame(procStat) bool         { return false }
func reapChild(int)                  {}

// waitExit cannot wait without reaping here: what the leader left is looked for after cmd.Wait.
func waitExit(int) {}

type pidCursor struct{}

func readCursor() (pidCursor, bool)                               { return pidCursor{}, false }
func processesSince(pidCursor, func(int) bool) ([]procStat, bool) { return nil, false }
