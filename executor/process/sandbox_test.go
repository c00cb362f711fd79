//go:build linux

package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// testSandbox is a sandbox uid of the tests' own, far from the server's range and from any
// account's.
var testSandbox = Sandbox{UID: 1_999_000_123, GID: 1_999_000_123}

func needRoot(t *testing.T) {
	t.Helper()
	if err := CanSandbox(); err != nil {
		t.Skip(err)
	}
}

// EndAll kills what runs as the uid whatever it did to hide: a process that started a session
// of its own with an empty environment, not the caller's child, survives nothing; the caller
// (root) is untouched.
func TestSandboxEndAllKillsEveryProcessOfItsUID(t *testing.T) {
	needRoot(t)
	cmd := exec.Command("/bin/sh", "-c", "setsid env -i sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(testSandbox.UID), Gid: uint32(testSandbox.GID), Groups: []uint32{}}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf) // the stray's PID: it is started
	if n == 0 {
		t.Fatal("the shell said nothing")
	}
	if live, err := liveUIDs(); err != nil || !live[testSandbox.UID] {
		t.Fatalf("no process of uid %d before EndAll (%v)", testSandbox.UID, err)
	}
	if err := testSandbox.EndAll(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() // the shell was killed too
	if live, err := liveUIDs(); err != nil || live[testSandbox.UID] {
		t.Fatalf("a process of uid %d is alive after EndAll (%v)", testSandbox.UID, err)
	}
	if err := (Sandbox{}).EndAll(); err == nil {
		t.Error("EndAll of uid 0 was not refused")
	}
}

// Next skips the uids other runs hold and those live processes run as.
func TestSandboxRangeNextSkipsTakenAndLive(t *testing.T) {
	rg := SandboxRange{First: os.Getuid(), Count: 3} // this test's own uid is live
	got, err := rg.Next(rg.First-1, map[int]bool{os.Getuid() + 1: true})
	if err != nil || got.UID != os.Getuid()+2 || got.GID != got.UID {
		t.Fatalf("Next = %+v, %v; want uid %d", got, err, os.Getuid()+2)
	}
	if _, err := (SandboxRange{First: os.Getuid(), Count: 1}).Next(os.Getuid()-1, nil); err == nil {
		t.Fatal("a range whose one uid is live allocated it")
	}
}

// Reachable opens the folders from the root down to a run 0711, and refuses a root whose
// parents others cannot pass.
func TestReachable(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	run := filepath.Join(root, "teams", "alpha", "r1")
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Reachable(root, run); err == nil || !strings.Contains(err.Error(), "closed to other users") {
		t.Fatalf("a root under a 0700 folder: %v", err)
	}
	for _, d := range []string{filepath.Dir(base), base} { // the test's own temporary folders
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := Reachable(root, run); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, filepath.Join(root, "teams"), filepath.Join(root, "teams", "alpha"), run} {
		if info, err := os.Stat(d); err != nil || info.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v %v, want 0711", d, info.Mode().Perm(), err)
		}
	}
	if err := Reachable(root, base); err == nil {
		t.Error("a folder above the root was made reachable")
	}
}

// A worker's environment starts from the allowlist: the driver's secrets stay behind; in a
// sandbox HOME and TMPDIR are the run's own, never the driver's.
func TestWorkerEnvIsNotTheDrivers(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sentinel")
	t.Setenv("HOME", "/root")
	r := &Runtime{WorkDir: "/runs/r1/work", ExtraEnv: []string{"RB_TIME_SCALE=1"}}
	env := strings.Join(r.env(), "\n")
	if strings.Contains(env, "sentinel") || !strings.Contains(env, "RB_TIME_SCALE=1") || !strings.Contains(env, "HOME=/root") {
		t.Fatalf("unsandboxed worker environment:\n%s", env)
	}
	r.Sandbox = &testSandbox
	cmd := exec.Command("true")
	cmd.Env = r.env()
	if home := lastValue(cmd.Environ(), "HOME"); home != "/runs/r1/work/home" {
		t.Fatalf("a sandboxed worker's HOME is %q", home)
	}
	if a := r.sysProcAttr(); a.Credential == nil || a.Credential.Uid != uint32(testSandbox.UID) || !a.Setpgid {
		t.Fatalf("a sandboxed worker starts as %+v", a)
	}
}

func lastValue(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if rest, ok := strings.CutPrefix(kv, key+"="); ok {
			v = rest
		}
	}
	return v
}

// A checkpoint directory given to the sandbox: everything in it, links as themselves, and
// nothing a link points at outside it.
func TestChownTreeStaysInside(t *testing.T) {
	needRoot(t)
	dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "sub", "model.pt"), []byte("w"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Symlink(filepath.Dir(outside), filepath.Join(dir, "dirlink"))
	if err := chownTree(dir, testSandbox.UID, testSandbox.GID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "model.pt"), filepath.Join(dir, "link")} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || int(st.Uid) != testSandbox.UID {
			t.Errorf("%s: owner %d (%v), want %d", p, st.Uid, err, testSandbox.UID)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(outside, &st); err != nil || st.Uid != 0 {
		t.Errorf("the file a link points at changed owner: %d (%v)", st.Uid, err)
	}
}

// Next never goes back below the last uid handed out, even to one that is free again: what a
// run's uid left on the host must not act as another run's.
func TestSandboxRangeNextNeverReuses(t *testing.T) {
	rg := SandboxRange{First: os.Getuid() + 1, Count: 10}
	got, err := rg.Next(os.Getuid()+3, nil)
	if err != nil || got.UID != os.Getuid()+4 {
		t.Fatalf("Next after %d = %+v, %v; want uid %d", os.Getuid()+3, got, err, os.Getuid()+4)
	}
	if _, err := rg.Next(os.Getuid()+10, nil); err == nil {
		t.Fatal("Next past the range's end handed out a uid")
	}
}

// Servers with roots of their own (each after 0) that share the host's ledger never get one uid,
// even claiming at once: the end of one run kills every process of its uid, so a shared uid
// would kill the other server's trainers (what CI once saw: "signal: killed" on a standby's
// first trials while another test's server ended its run). Without the ledger they collide.
func TestSandboxRangeClaimIsHostWide(t *testing.T) {
	const first = 1_900_000_000 // no account, no live process
	ledger := filepath.Join(t.TempDir(), "state", "sandbox-uid")
	rg := SandboxRange{First: first, Count: 1000, Ledger: ledger}
	const servers = 16
	got := make(chan int, servers)
	errs := make(chan error, servers)
	for range servers {
		go func() {
			sb, err := rg.Claim(0, nil)
			got <- sb.UID
			errs <- err
		}()
	}
	seen := map[int]bool{}
	for range servers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		uid := <-got
		if seen[uid] || uid < first || uid >= first+servers {
			t.Fatalf("uid %d handed out twice or outside %d..%d: %v", uid, first, first+servers-1, seen)
		}
		seen[uid] = true
	}
	b, err := os.ReadFile(ledger)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(first+servers-1) {
		t.Fatalf("ledger holds %q (%v), want %d", b, err, first+servers-1)
	}
	// A server whose own record is ahead of the ledger (a root moved from another host) is not
	// sent back.
	if sb, err := rg.Claim(first+500, nil); err != nil || sb.UID != first+501 {
		t.Fatalf("Claim after %d = %+v, %v", first+500, sb, err)
	}
	if err := os.WriteFile(ledger, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := rg.Claim(0, nil); err == nil || !strings.Contains(err.Error(), ledger) {
		t.Fatalf("a ledger that is not a number gave %v, want an error naming it", err)
	}
	// Without a ledger, two servers' claims collide: what the ledger is for.
	a, _ := SandboxRange{First: first, Count: 10}.Claim(0, nil)
	b2, _ := SandboxRange{First: first, Count: 10}.Claim(0, nil)
	if a.UID != b2.UID {
		t.Fatalf("without a ledger two claims got %d and %d; the test no longer shows the collision", a.UID, b2.UID)
	}
}
