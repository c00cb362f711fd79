//go:build linux

package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// BecomeSubreaper makes the calling process a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
// a descendant orphaned by its parent's exit, a trainer's setsid'd child say, becomes a child of
// this process instead of init. The driver of the local backend calls it once at start, before
// it launches workers; the runtime then reaps the orphans it ends. It is process-wide and lasts
// until exit: a process with other children (a Nomad agent's, say) would adopt their orphans
// too, and nothing would reap those.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	return nil
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	pid, ppid, pgid int
	state           byte
	start           uint64 // clock ticks after boot (field 22): with the PID, the process's identity
	comm            string
}

// dead says the process has exited (a zombie waiting to be reaped, or being reaped).
func (s procStat) dead() bool { return s.state == 'Z' || s.state == 'X' }

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(pid, b)
}

// parseStat reads /proc/PID/stat. The command name (field 2) is in parentheses and may hold
// anything, spaces and parentheses included: the fields are counted after the last ')'.
func parseStat(pid int, b []byte) (procStat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[end+1:])) // f[0] is field 3, field n is f[n-3]
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procStat{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0], start: start, comm: string(b[open+1 : end])}, nil
}

// tokenOf is the worker token in a process's environment ("" when it has none or it cannot be
// read: another user's process, or one that has exited).
func tokenOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(TokenVar+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// processes lists every process /proc shows.
func processes() ([]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make([]procStat, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if st, err := readStat(pid); err == nil { // gone meanwhile
			out = append(out, st)
		}
	}
	return out, nil
}

// bootID names this boot of the machine: a start time is a process's identity within one boot.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// waitExit returns once the child pid has exited, without reaping it: its exit status is left
// for cmd.Wait (waitid with WNOWAIT). It also returns when pid is no child to wait for (reaped
// already).
func waitExit(pid int) {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
}

// killSame sends SIGKILL to the process st describes, if it is still that process: its start
// time is checked through a pidfd, which then names that process and no later one.
func killSame(st procStat) bool {
	p, err := os.FindProcess(st.pid)
	if err != nil {
		return false
	}
	defer p.Release()
	if now, err := readStat(st.pid); err != nil || now.start != st.start || now.dead() {
		return false
	}
	return p.Signal(syscall.SIGKILL) == nil
}

// reapChild reaps pid when it is a child of this process (a stray re-parented here,
// BecomeSubreaper), so that it does not stay a zombie: once it has exited, or at once when block
// is false and it has not. It returns at once when pid is no child of this process.
func reapChild(pid int, block bool) {
	opts := unix.WNOHANG
	if block {
		opts = 0
	}
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(pid, &ws, opts, nil); err != unix.EINTR {
			return
		}
	}
}

// pidCursor is where the kernel's handing out of PIDs stood: the last PID handed out in this
// namespace, and the forks since boot (/proc/stat's processes, of every namespace: a bound).
type pidCursor struct {
	last  int
	forks uint64
}

// readCursor reads where PIDs stand now (ok false when /proc does not say).
func readCursor() (c pidCursor, ok bool) {
	last, err := readInt("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		return c, false
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return c, false
	}
	_, rest, found := bytes.Cut(b, []byte("\nprocesses "))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	forks, err := strconv.ParseUint(string(line), 10, 64)
	if !found || err != nil {
		return c, false
	}
	return pidCursor{last: last, forks: forks}, true
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// processesSince lists the processes whose PIDs were handed out after from, but those skip
// names: a worker's descendants, looked for when it exits, without reading every process
// /proc shows (at 64 workers, a look through all of them took 4 to 6 ms of each launch). PIDs
// are handed out in turn, from the last one up, round again after pid_max, passing over those
// in use; ok is false when the turn may have come round past from's PID since (the forks
// since, and the threads alive that it passes over, are more than half of pid_max), or /proc
// does not say. A process that exits meanwhile is left out.
func processesSince(from pidCursor, skip func(pid int) bool) (out []procStat, ok bool) {
	now, ok := readCursor()
	pidMax, err := readInt("/proc/sys/kernel/pid_max")
	if !ok || err != nil {
		return nil, false
	}
	threads := pidMax // /proc/loadavg's "running/total": scheduling entities alive
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 4 {
			if _, total, found := strings.Cut(f[3], "/"); found {
				if n, err := strconv.Atoi(total); err == nil {
					threads = n
				}
			}
		}
	}
	if mayHaveComeRound(from.forks, now.forks, threads, pidMax) {
		return nil, false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || !handedOutBetween(pid, from.last, now.last) || skip(pid) {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out, true
}

// mayHaveComeRound says whether the turn of PIDs may have come round since a cursor: the forks
// since, and the threads alive that the turn passes over, are half of pid_max or more (or the
// count went back: another boot).
func mayHaveComeRound(forksThen, forksNow uint64, threads, pidMax int) bool {
	return forksNow < forksThen || forksNow-forksThen+uint64(threads) >= uint64(pidMax)/2
}

// handedOutBetween says whether pid lies after from and up to to, in the turn PIDs are handed
// out in: from to to with no wrap, or round past pid_max.
func handedOutBetween(pid, from, to int) bool {
	if from <= to {
		return from < pid && pid <= to
	}
	return pid > from || pid <= to
}
