//go:build linux

package process

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CanSandbox says whether this process may run trainers in a Sandbox: it needs to change
// identity (CAP_SETUID, CAP_SETGID), give directories away (CAP_CHOWN) and end what runs as
// another uid (CAP_KILL); root has all four. The error wraps ErrNoSandbox.
func CanSandbox() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoSandbox, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		hex, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return fmt.Errorf("%w: /proc/self/status: %v", ErrNoSandbox, err)
		}
		need := uint64(1)<<unix.CAP_SETUID | 1<<unix.CAP_SETGID | 1<<unix.CAP_CHOWN | 1<<unix.CAP_KILL
		if caps&need != need {
			return fmt.Errorf("%w: uid %d lacks CAP_SETUID, CAP_SETGID, CAP_CHOWN or CAP_KILL (run the server as root)", ErrNoSandbox, os.Geteuid())
		}
		return nil
	}
	return fmt.Errorf("%w: /proc/self/status says no capabilities", ErrNoSandbox)
}

// EndAll kills every process that runs as the sandbox's uid, until none is left alive (2 s at
// most). It is kill(-1, SIGKILL) sent as that uid: from a thread of its own that takes the uid
// (setresuid on that thread alone, which is then never used again: the Go runtime ends a
// thread whose goroutine exits locked to it), so that it reaches exactly that uid's processes,
// whatever session, group or environment they have.
func (s Sandbox) EndAll() error {
	if s.UID <= 0 {
		return fmt.Errorf("end a sandbox: uid %d is not a sandbox's", s.UID)
	}
	done := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // never unlocked: this thread dies with the goroutine
		// Raw syscalls: the libc-style wrappers would change every thread of the process.
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(s.GID), uintptr(s.GID), uintptr(s.GID)); e != 0 {
			done <- fmt.Errorf("end sandbox uid %d: setresgid: %w", s.UID, e)
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(s.UID), uintptr(s.UID), uintptr(s.UID)); e != 0 {
			done <- fmt.Errorf("end sandbox uid %d: setresuid: %w", s.UID, e)
			return
		}
		for deadline := time.Now().Add(2 * time.Second); ; {
			// kill(-1) reaches every process this uid may signal but the caller: none is forked
			// while the kernel walks them, so one pass ends all that live at the time.
			if _, _, e := syscall.RawSyscall(syscall.SYS_KILL, ^uintptr(0), uintptr(syscall.SIGKILL), 0); e == syscall.ESRCH {
				done <- nil
				return
			}
			live, err := liveUIDs()
			if err == nil && !live[s.UID] {
				done <- nil // what is left are zombies, their parents' to reap
				return
			}
			if time.Now().After(deadline) {
				done <- fmt.Errorf("end sandbox uid %d: processes still alive after 2 s", s.UID)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return <-done
}

// liveUIDs are the uids of the live processes of the host (zombies aside).
func liveUIDs() (map[int]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // exited meanwhile
		}
		if err != nil {
			return nil, err
		}
		uid, zombie := -1, false
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok {
				zombie = strings.HasPrefix(strings.TrimSpace(v), "Z") || strings.HasPrefix(strings.TrimSpace(v), "X")
			}
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					uid, _ = strconv.Atoi(f[0])
				}
			}
		}
		if uid >= 0 && !zombie {
			out[uid] = true
		}
	}
	return out, nil
}
