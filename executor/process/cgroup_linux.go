//go:build linux

package process

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runCgroup is a cgroup v2 of a run's workers, under the driver's own cgroup: each worker is
// started in it (CLONE_INTO_CGROUP), its descendants stay in it whatever they do (setsid, a
// cleared environment), and killing it (cgroup.kill) ends them all.
type runCgroup struct {
	dir string
	fd  int // the directory, open, for SysProcAttr.CgroupFD
}

// openCgroup opens the cgroup v2 name under this process's own cgroup, making it, and checks
// that a process can be started in it. It fails where cgroup v2 is not mounted, not writable
// (an unprivileged user without delegation), or the kernel cannot start a process in a cgroup.
func openCgroup(name string) (*runCgroup, error) {
	dir, err := cgroupDir(name)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup: open %s: %w", dir, err)
	}
	c := &runCgroup{dir: dir, fd: fd}
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := probe.Run(); err != nil {
		unix.Close(fd)
		os.Remove(dir)
		return nil, fmt.Errorf("cgroup: start a process in %s: %w", dir, err)
	}
	return c, nil
}

// cgroupDir is where the cgroup v2 name is, under this process's own cgroup.
func cgroupDir(name string) (string, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	return filepath.Join(mount, own, name), nil
}

// remove kills every process in the cgroup, waits until it is empty, and removes it. A cgroup
// once killed is never used again: on some kernels (6.18 here) a process later started into it
// with CLONE_INTO_CGROUP is killed at once.
func (c *runCgroup) remove() error {
	err := removeCgroupDir(c.dir)
	unix.Close(c.fd)
	return err
}

// removeCgroup removes the cgroup name, as remove does, if there is one: what a dead driver of
// the run left.
func removeCgroup(name string) error {
	dir, err := cgroupDir(name)
	if err != nil {
		return nil // no cgroup v2 here: there is nothing to remove
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return removeCgroupDir(dir)
}

// removeCgroupDir kills every process in the cgroup at dir (cgroup.kill), waits until it is
// empty (2 s at most) and removes it. The kernel marks cgroup.events modified when the cgroup
// empties: the wait blocks on that notice (inotify), never on a timer.
func removeCgroupDir(dir string) error {
	events := filepath.Join(dir, "cgroup.events")
	notify, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	defer unix.Close(notify)
	if _, err := unix.InotifyAddWatch(notify, events, unix.IN_MODIFY); err != nil {
		return fmt.Errorf("cgroup: watch %s: %w", events, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("cgroup: kill %s: %w", dir, err)
	}
	buf := make([]byte, 4096)
	for deadline := time.Now().Add(2 * time.Second); ; {
		b, err := os.ReadFile(events)
		if err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		if strings.Contains(string(b), "populated 0") {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("cgroup: %s still holds processes 2 s after it was killed", dir)
		}
		fds := []unix.PollFd{{Fd: int32(notify), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("cgroup: %w", err)
		}
		unix.Read(notify, buf) // drain the notices: the file says what changed
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// cgroup2Mount is where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on a hybrid host).
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if ok && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return fields[4], nil
		}
	}
	return "", errors.New("cgroup: no cgroup v2 hierarchy is mounted")
}

// ownCgroup is this process's cgroup v2 path, from /proc/self/cgroup ("0::/PATH").
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("cgroup: this process is in no cgroup v2")
}
