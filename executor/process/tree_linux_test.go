package process

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The command name may hold spaces and parentheses (a process names itself): the fields are
// those after the last ')'.
func TestParseStat(t *testing.T) {
	line := "4242 (evil) R 1 1 1) S 7 8 9 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n"
	st, err := parseStat(4242, []byte(line))
	if err != nil || st.comm != "evil) R 1 1 1" || st.state != 'S' || st.ppid != 7 || st.pgid != 8 || st.start != 987654 {
		t.Fatalf("parseStat: %+v, %v", st, err)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S a 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := parseStat(4242, []byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// parseStat never panics, and what it accepts says what the fields say.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 5 1 1 1\n"))
	f.Add([]byte("4242 (a b)) Z 7 8 9 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStat(1, b)
		if err != nil {
			return
		}
		line := fmt.Appendf(nil, "1 (%s) %s %d %d %s%d", st.comm, []byte{st.state}, st.ppid, st.pgid, strings.Repeat("0 ", 16), st.start)
		if again, err := parseStat(1, line); err != nil || again != st {
			t.Fatalf("%q: %+v, again %+v (%v)", b, st, again, err)
		}
	})
}

// PIDs are handed out in turn and round again past pid_max: what lies after from and up to to.
func TestHandedOutBetween(t *testing.T) {
	for _, c := range []struct {
		pid, from, to int
		want          bool
	}{
		{101, 100, 200, true}, {200, 100, 200, true}, {100, 100, 200, false}, {201, 100, 200, false}, {5, 100, 200, false},
		{32000, 32000, 50, false}, {32001, 32000, 50, true}, {3, 32000, 50, true}, {50, 32000, 50, true}, {51, 32000, 50, false},
	} {
		if got := handedOutBetween(c.pid, c.from, c.to); got != c.want {
			t.Errorf("handedOutBetween(%d, %d, %d) = %v, want %v", c.pid, c.from, c.to, got, c.want)
		}
	}
}

// The processes started after a cursor are found, with those older left out and those skip
// names.
func TestProcessesSince(t *testing.T) {
	older := exec.Command("sleep", "30")
	if err := older.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { older.Process.Kill(); older.Wait() }()
	from, ok := readCursor()
	if !ok {
		t.Fatal("/proc says nothing of the PIDs handed out")
	}
	var newer []*exec.Cmd
	for range 3 {
		c := exec.Command("sleep", "30")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { c.Process.Kill(); c.Wait() }()
		newer = append(newer, c)
	}
	skipped := newer[2].Process.Pid
	list, ok := processesSince(from, func(pid int) bool { return pid == skipped })
	if !ok {
		t.Fatal("processesSince could not tell, a moment after the cursor")
	}
	pids := make([]int, len(list))
	for i, st := range list {
		pids[i] = st.pid
	}
	for _, c := range newer[:2] {
		if !slices.Contains(pids, c.Process.Pid) {
			t.Errorf("%d, started after the cursor, not among %v", c.Process.Pid, pids)
		}
	}
	for _, pid := range []int{older.Process.Pid, os.Getpid(), skipped} {
		if slices.Contains(pids, pid) {
			t.Errorf("%d (older, this process, or skipped) among %v", pid, pids)
		}
	}
}

// A cursor is trusted only while the PIDs cannot have come round to it again.
func TestMayHaveComeRound(t *testing.T) {
	for _, c := range []struct {
		then, now    uint64
		threads, max int
		want         bool
	}{
		{1000, 1500, 200, 32768, false}, {1000, 1000 + 16384 - 200, 200, 32768, true}, {1000, 1000 + 16000, 100, 32768, false},
		{1000, 900, 10, 32768, true}, {0, 2_000_000, 5000, 4_194_304, false}, {0, 2_100_000, 5000, 4_194_304, true},
	} {
		if got := mayHaveComeRound(c.then, c.now, c.threads, c.max); got != c.want {
			t.Errorf("mayHaveComeRound(%d, %d, %d threads, pid_max %d) = %v, want %v", c.then, c.now, c.threads, c.max, got, c.want)
		}
	}
}
