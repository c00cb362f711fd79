package ec2sim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userData is an instance's user-data process, the leader of its own process group: what runs
// "on the instance" is that group.
type userData struct {
	pgid   int
	root   string        // the instance's root: what runs in it is the instance's, in a group or not
	exited chan struct{} // closed once the leader is reaped (at once when nothing ran)
	err    error         // the leader's exit, readable after exited
}

// startUserData runs the instance's user-data when it is a script (it starts with #!), as
// cloud-init would: written to a file in the instance's directory and run by the interpreter
// its #! line names, in that directory, with console.log as its stdout and stderr.
// User-data that is not a script runs nothing, and the instance runs until terminated.
func (s *Server) startUserData(in *instance) *userData {
	u := &userData{exited: make(chan struct{})}
	s.mu.Lock()
	dir, id, data, md := in.Dir, in.ID, in.UserData, in.IMDS
	s.mu.Unlock()
	if !bytes.HasPrefix(data, []byte("#!")) {
		s.console(in, "ec2sim: user-data is not a script (no #! line): nothing to run")
		u.exited = nil // a nil channel never fires: the instance runs until halted
		return u
	}
	fail := func(err error) *userData {
		s.console(in, "ec2sim: user-data did not start: %v", err)
		u.err = err
		close(u.exited)
		return u
	}
	script := filepath.Join(dir, "user-data")
	if err := os.WriteFile(script, data, 0o755); err != nil {
		return fail(err)
	}
	// Running the interpreter on the file, as the kernel would, rather than the file itself
	// avoids ETXTBSY: another goroutine's fork may still hold the file open for writing.
	interp, arg := shebang(data)
	args := []string{}
	if arg != "" {
		args = append(args, arg)
	}
	log, err := os.OpenFile(filepath.Join(dir, "console.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fail(err)
	}
	defer log.Close()
	cmd := exec.Command(interp, append(args, script)...)
	cmd.Dir = filepath.Join(dir, "root")
	if err := os.MkdirAll(cmd.Dir, 0o755); err != nil {
		return fail(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + cmd.Dir,
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + md + "/",
	}, s.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	u.pgid, u.root = cmd.Process.Pid, cmd.Dir
	s.mu.Lock()
	in.PID = cmd.Process.Pid
	s.mu.Unlock()
	s.console(in, "ec2sim: %s runs user-data as process %d", id, cmd.Process.Pid)
	go func() {
		u.err = cmd.Wait()
		close(u.exited)
	}()
	return u
}

// shebang reads a script's #! line: the interpreter and its one optional argument.
func shebang(data []byte) (interp, arg string) {
	line, _, _ := bytes.Cut(data[2:], []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return "/bin/sh", ""
	}
	return fields[0], strings.Join(fields[1:], " ")
}

func (u *userData) status() string {
	if u.err == nil {
		return "exit status 0"
	}
	return u.err.Error()
}

// kill ends what runs on the instance: SIGTERM to the process group, SIGKILL after grace, and it
// returns when the leader is reaped and no live process is left in the group (a bounded wait:
// a process that left the group, or one that survives SIGKILL, is not waited for).
//
// Processes that left the group (a Nomad client's task executors start their own sessions) die
// with the instance too, as on a machine that is switched off: every process running in the
// instance's root, and all their descendants, are killed.
func (u *userData) kill(grace time.Duration) {
	if u.pgid == 0 {
		return
	}
	_ = syscall.Kill(-u.pgid, syscall.SIGTERM)
	if !u.waitGone(grace) {
		_ = syscall.Kill(-u.pgid, syscall.SIGKILL)
		u.waitGone(2 * time.Second)
	}
	for _, pid := range strays(u.root) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// strays are the live processes whose working directory is root or below it, and all their
// descendants.
func strays(root string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil || root == "" {
		return nil
	}
	parent := map[int]int{}
	var in []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, pp, _, ok := procStatus(pid); ok {
			parent[pid] = pp
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err == nil && (cwd == root || strings.HasPrefix(cwd, root+"/") || strings.HasPrefix(cwd, root+" (deleted)")) {
			in = append(in, pid)
		}
	}
	kill := map[int]bool{}
	for _, pid := range in {
		kill[pid] = true
	}
	for changed := true; changed; { // descendants, to a fixed point
		changed = false
		for pid, pp := range parent {
			if kill[pp] && !kill[pid] {
				kill[pid], changed = true, true
			}
		}
	}
	out := make([]int, 0, len(kill))
	for pid := range kill {
		out = append(out, pid)
	}
	return out
}

func (u *userData) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		select {
		case <-u.exited:
			if !groupAlive(u.pgid) {
				return true
			}
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupAlive says whether a process group has a live member. Zombies do not count: an orphan
// reparented to a pid 1 that does not reap stays a zombie forever, yet runs nothing.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: kill(2) said the group exists
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pg, state, ok := procStat(pid); ok && pg == pgid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

// procStat reads a process's group and state from /proc/PID/stat.
func procStat(pid int) (pgid int, state byte, ok bool) {
	pgid, _, state, ok = procStatus(pid)
	return pgid, state, ok
}

// procStatus reads a process's group, parent and state from /proc/PID/stat.
func procStatus(pid int) (pgid, ppid int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	// The command name may hold spaces and parentheses: the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	pp, err1 := strconv.Atoi(f[1])
	pg, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	return pg, pp, f[0][0], true
}

// console appends one of the fake's own lines to an instance's console.log.
func (s *Server) console(in *instance, format string, args ...any) {
	s.mu.Lock()
	dir := in.Dir
	s.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, "console.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339Nano)}, args...)...)
}
