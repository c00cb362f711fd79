package process

import (
	"strings"
	"testing"
)

// The line a failure quotes is the last non-blank one, whole across writes, bounded, printable
// (a terminal sequence dropped whole, not its escape byte alone); a trainer that died mid-line is
// quoted by that line.
func TestLastLine(t *testing.T) {
	for _, tc := range []struct {
		writes []string
		want   string
	}{
		{nil, ""},
		{[]string{"Traceback:\n  File x\nModuleNotFoundError: torch\n\n  \n"}, "ModuleNotFoundError: torch"},
		{[]string{"Module", "NotFound", "Error: torch\n"}, "ModuleNotFoundError: torch"},
		{[]string{"done\n", "dying mid-li"}, "dying mid-li"},
		{[]string{"\x1b[31mred\x1b[0m\n"}, "red"},
		{[]string{"\x1b[2J\x1b[H\x1b]0;pwned\x07no module named torch\r\n"}, "no module named torch"},
		{[]string{strings.Repeat("x", 10_000) + "\n"}, strings.Repeat("x", lastLineMax)},
	} {
		var l lastLine
		for _, w := range tc.writes {
			if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("write: %d, %v", n, err)
			}
		}
		if got := l.String(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.writes, got, tc.want)
		}
		if len(l.partial) > lastLineMax || len(l.line) > lastLineMax {
			t.Errorf("%q: kept %d and %d bytes", tc.writes, len(l.partial), len(l.line))
		}
	}
}
