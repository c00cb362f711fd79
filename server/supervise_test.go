package server

import (
	"errors"
	"strings"
	"testing"
)

// A driver's standard error is kept to its end, however much it writes; the last line is what
// a paused run whose journal could not say so reports.
func TestDriverExitLastLine(t *testing.T) {
	tail := &tailWriter{max: 64}
	tail.Write([]byte(strings.Repeat("noise\n", 1000)))
	tail.Write([]byte("rubberband: paused: journal cannot be written at /r/journal.jsonl\n"))
	if got := tail.String(); len(got) > 64 {
		t.Fatalf("kept %d bytes, bound 64", len(got))
	}
	err := &driverExit{err: errors.New("exit status 4"), stderr: "a\nrubberband: paused: disk full at /d\n"}
	if got := lastLine(err); got != "rubberband: paused: disk full at /d" {
		t.Fatalf("last line %q", got)
	}
	if got := lastLine(errors.New("exit status 4")); got != "exit status 4" {
		t.Fatalf("without output: %q", got)
	}
}
