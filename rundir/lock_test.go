package rundir

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
)

func TestLockDirExcludesASecondHolder(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	l, err := LockDir(dir, "r-one", nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Previous != nil {
		t.Fatalf("a fresh directory has a previous holder %+v", l.Previous)
	}
	h, live, err := ReadHolder(dir)
	if err != nil || !live || h.PID != os.Getpid() || h.Host != host || h.RunID != "r-one" || !h.Released.IsZero() {
		t.Fatalf("ReadHolder while held: %+v live %v %v", h, live, err)
	}
	// flock locks belong to the open file, so a second LockDir in this process conflicts.
	_, err = LockDir(dir, "r-two", nil)
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second LockDir: %v, want a *LockedError", err)
	}
	if le.Dir != dir || le.PID != os.Getpid() || le.Host != host || le.RunID != "r-one" || !le.Since.Equal(h.Since) {
		t.Fatalf("LockedError %+v, want the holder %+v", le, h)
	}
	for _, want := range []string{"state directory " + dir + " is in use by PID " + fmt.Sprint(os.Getpid()), "on host " + host,
		"(run r-one)", "`rubberband cancel " + dir + "` stops it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// Neither the failed attempt nor the probe disturbed the holder.
	if h2, live, _ := ReadHolder(dir); !live || h2 != h {
		t.Fatalf("after a refused LockDir: %+v live %v, want %+v", h2, live, h)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	h, live, err = ReadHolder(dir)
	if err != nil || live || h.RunID != "r-one" || h.Released.IsZero() {
		t.Fatalf("ReadHolder after Close: %+v live %v %v", h, live, err)
	}
	// A lock released cleanly is taken again with no previous holder to report.
	l, err = LockDir(dir, "r-two", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Previous != nil {
		t.Fatalf("a lock released cleanly reported as taken over from %+v", l.Previous)
	}
}

func TestLockDirTakesOverALockLeftByTheDead(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dead := Holder{PID: 999999, Host: "elsewhere", RunID: "r-dead", Since: since}
	cases := []struct {
		name   string
		record string // the lock file's content
		want   *Holder
	}{
		{"holder died", mustJSON(t, dead), &dead},
		{"holder released", mustJSON(t, Holder{PID: 1, RunID: "r-old", Since: since, Released: since.Add(time.Hour)}), nil},
		{"record torn in mid-write", `{"pid":12`, nil},
		{"empty", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "lock"), []byte(c.record), 0o644); err != nil {
				t.Fatal(err)
			}
			h, live, err := ReadHolder(dir)
			if live || (c.want != nil && (err != nil || h != *c.want)) {
				t.Fatalf("ReadHolder of a dead lock: %+v live %v %v", h, live, err)
			}
			l, err := LockDir(dir, "r-new", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if (l.Previous == nil) != (c.want == nil) || (c.want != nil && *l.Previous != *c.want) {
				t.Fatalf("Previous %+v, want %+v", l.Previous, c.want)
			}
			if h, live, err := ReadHolder(dir); err != nil || !live || h.PID != os.Getpid() || h.RunID != "r-new" {
				t.Fatalf("ReadHolder after the takeover: %+v live %v %v", h, live, err)
			}
		})
	}
}

func TestReadHolderOfAnUnlockedDirectory(t *testing.T) {
	h, live, err := ReadHolder(t.TempDir())
	if err != nil || live || h != (Holder{}) {
		t.Fatalf("%+v live %v %v, want nothing", h, live, err)
	}
}

// lockHelperEnv makes the test binary, run as TestLockHelperProcess, lock the directory it names.
const lockHelperEnv = "RUBBERBAND_TEST_LOCK_DIR"

// TestLockHelperProcess is the second process of TestLockDirAcrossProcesses: it takes the lock,
// says so, and waits to be killed.
func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("runs only as the helper process of TestLockDirAcrossProcesses")
	}
	if _, err := LockDir(dir, "r-helper", nil); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(1)
}

func TestLockDirAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	said := bufio.NewScanner(out)
	for said.Scan() && said.Text() != "locked" {
		t.Logf("helper: %s", said.Text())
	}
	if said.Text() != "locked" {
		t.Fatal("the helper never took the lock")
	}
	pid := cmd.Process.Pid

	var le *LockedError
	if _, err := LockDir(dir, "r-main", nil); !errors.As(err, &le) || le.PID != pid || le.RunID != "r-helper" {
		t.Fatalf("LockDir while the helper holds it: %v, want a *LockedError naming PID %d", err, pid)
	}
	if h, live, err := ReadHolder(dir); err != nil || !live || h.PID != pid {
		t.Fatalf("ReadHolder while the helper holds it: %+v live %v %v", h, live, err)
	}

	// The kernel releases the lock of a process that dies; its record stays.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if h, live, err := ReadHolder(dir); err != nil || live || h.PID != pid {
		t.Fatalf("ReadHolder after the helper died: %+v live %v %v", h, live, err)
	}
	l, err := LockDir(dir, "r-main", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Previous == nil || l.Previous.PID != pid || l.Previous.RunID != "r-helper" {
		t.Fatalf("took over with Previous %+v, want the helper, PID %d", l.Previous, pid)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The holder's record is timed by the clock the lock is given, not the wall clock: since when it
// holds the lock, and when it let go.
func TestLockDirTimesTheHolderByItsClock(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	l, err := LockDir(dir, "r-clock", clock.Frozen{At: at})
	if err != nil {
		t.Fatal(err)
	}
	if h, live, err := ReadHolder(dir); err != nil || !live || !h.Since.Equal(at) {
		t.Fatalf("holder %+v live %v (%v), want one since %s", h, live, err, at)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if h, live, err := ReadHolder(dir); err != nil || live || !h.Released.Equal(at) {
		t.Fatalf("holder %+v live %v (%v), want one released at %s", h, live, err, at)
	}
}
