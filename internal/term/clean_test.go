package term

import (
	"strings"
	"testing"
)

// What is cleaned is written without its escape sequences, and the note counts them only when
// there were any.
func TestCleanTo(t *testing.T) {
	t.Parallel()
	var out, note strings.Builder
	w, done := CleanTo(&out, &note, "trial-1.log")
	w.Write([]byte("a\x1b[31mb\x1b[0m\n"))
	done()
	if out.String() != "ab\n" || note.String() != "rubberband: removed 2 terminal control codes from trial-1.log; --raw prints them\n" {
		t.Errorf("cleaned %q, note %q", out.String(), note.String())
	}
	note.Reset()
	w, done = CleanTo(&out, &note, "driver.log")
	w.Write([]byte("plain\n"))
	done()
	if note.Len() != 0 {
		t.Errorf("a note for nothing removed: %q", note.String())
	}
}
