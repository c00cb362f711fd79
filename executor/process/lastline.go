package process

import (
	"bytes"
	"strings"
	"sync"
	"unicode"

	"github.com/rubberband-hpo/rubberband/internal/term"
)

// lastLineMax bounds the line a failure quotes: enough for "ModuleNotFoundError: No module
// named 'torch'", not a traceback.
const lastLineMax = 200

// lastLine keeps the last non-blank line a gang's trainers printed (both streams, every worker),
// so that a failure says what the trainer said as it died, not only its exit status: the first
// thing a user would look for in the log. Its memory is bounded whatever is written.
type lastLine struct {
	mu      sync.Mutex
	line    []byte // the last complete non-blank line, at most lastLineMax bytes
	partial []byte // the line being written, at most lastLineMax bytes of it
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.add(p)
			break
		}
		l.add(p[:i])
		if len(bytes.TrimSpace(l.partial)) > 0 {
			l.line = append(l.line[:0], l.partial...)
		}
		l.partial = l.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *lastLine) add(p []byte) {
	if room := lastLineMax - len(l.partial); room > 0 {
		l.partial = append(l.partial, p[:min(room, len(p))]...)
	}
}

// String is the line, printable (escape sequences dropped whole, then control characters), or "".
func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := l.line
	if len(bytes.TrimSpace(l.partial)) > 0 { // it died mid-line
		line = l.partial
	}
	var clean bytes.Buffer
	term.NewSanitizer(&clean).Write(line) // a bytes.Buffer takes every write
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, string(bytes.ToValidUTF8(clean.Bytes(), nil))))
}
