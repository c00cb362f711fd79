//go:build linux

package process

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
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
// most): kill(-1, SIGKILL) sent by a shell started as that uid, which reaches exactly that uid's
// processes (and not itself), whatever session, group or environment they have. A child does
// it, not a thread of this process that takes the uid: the process's identity as others see it
// is its main thread's, which a thread's change could become.
func (s Sandbox) EndAll() error {
	if s.UID <= 0 || s.GID <= 0 {
		return fmt.Errorf("end a sandbox: uid %d, gid %d are not a sandbox's", s.UID, s.GID)
	}
	for deadline := time.Now().Add(2 * time.Second); ; {
		live, err := liveUIDs()
		if err != nil {
			return fmt.Errorf("end sandbox uid %d: %w", s.UID, err)
		}
		if !live[s.UID] {
			return nil // what is left are zombies, their parents' to reap
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("end sandbox uid %d: processes still alive after 2 s", s.UID)
		}
		// One pass ends all that live when it runs: the kernel forks none while it walks them.
		cmd := exec.Command("/bin/sh", "-c", "kill -KILL -1")
		cmd.Env, cmd.Dir = []string{}, "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{}}}
		if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
			return fmt.Errorf("end sandbox uid %d: %w", s.UID, err) // it did not start
		}
	}
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
