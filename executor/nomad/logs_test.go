package nomad

import (
	"strings"
	"testing"
)

// A log read again from its start is echoed once: what a read wrote before is not written again,
// what it did not reach is.
func TestEchoOnce(t *testing.T) {
	var log strings.Builder
	e := &echoOnce{w: &log}
	for _, read := range [][]string{{"a\n", "b\n"}, {"a\n", "b\n", "c\n"}, {"a\n"}, {"a\n", "b\n", "c\n", "d\n"}} {
		e.pos = 0
		for _, line := range read {
			if n, err := e.Write([]byte(line)); n != len(line) || err != nil {
				t.Fatalf("Write %q: %d, %v", line, n, err)
			}
		}
	}
	if log.String() != "a\nb\nc\nd\n" {
		t.Fatalf("echoed %q", log.String())
	}
}
