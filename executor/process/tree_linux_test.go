package process

import (
	"fmt"
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
