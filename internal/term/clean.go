package term

import (
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/internal/format"
)

// CleanTo is w cleaned of terminal control codes (a Sanitizer), and done, which says on note how
// many it removed from what, if any (`rubberband logs --raw` prints them).
func CleanTo(w, note io.Writer, what string) (clean io.Writer, done func()) {
	s := NewSanitizer(w)
	return s, func() {
		if s.Removed > 0 {
			fmt.Fprintf(note, "rubberband: removed %s from %s; --raw prints them\n", format.Plural(s.Removed, "terminal control code"), what)
		}
	}
}
