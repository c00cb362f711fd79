package term

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rubberband-hpo/rubberband/internal/syncio"
)

// Work over a second shows progress even where stderr is not a terminal; quick work shows none.
func TestTickerShowsLongWorkOnly(t *testing.T) {
	var quick syncio.Buffer
	Ticker(&quick, "planning", func() string { return "3 plans simulated" })()
	var slow syncio.Buffer
	stop := Ticker(&slow, "planning", func() string { return "7 plans simulated" })
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(slow.String(), "\n"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no progress line after 10 s")
		}
	}
	stop()
	stop() // idempotent
	if quick.String() != "" {
		t.Errorf("work done at once printed %q", quick.String())
	}
	if got := slow.String(); !strings.HasPrefix(got, "planning: 7 plans simulated, 1s\n") && !strings.HasPrefix(got, "planning: 7 plans simulated, 2s\n") {
		t.Errorf("progress line %q", got)
	}
}

// The confirmation takes y or yes, anything else (EOF included) is no; /dev/null is not a
// terminal to ask on, though it is a character device.
func TestConfirmAndIsTTY(t *testing.T) {
	for in, want := range map[string]bool{"y\n": true, "YES\n": true, " yes ": true, "\n": false, "n\n": false, "": false, "yeah\n": false} {
		var q strings.Builder
		if got := Confirm(strings.NewReader(in), &q, "terminate?"); got != want || q.String() != "terminate? [y/N] " {
			t.Errorf("%q: %v (asked %q)", in, got, q.String())
		}
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTTY(f) || Writes(f) || Writes(&bytes.Buffer{}) {
		t.Error("/dev/null or a buffer is a terminal")
	}
}

// The sanitizer removes what a terminal would act on and keeps the text, newlines and tabs:
// colours, cursor moves, a window title, a clipboard write, a hyperlink's wrapper, 8-bit
// controls, carriage returns and bells; UTF-8 text stays whole.
func TestSanitizer(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\n\tindented ✓ é © 2026\n", "plain text\n\tindented ✓ é © 2026\n"},
		{"\x1b[31mred\x1b[0m and \x1b[1;32mbold green\x1b[m\n", "red and bold green\n"},
		{"a\x1b[2J\x1b[Hb\x1b[10;20Hc", "abc"},
		{"\x1b]0;owned title\x07after", "after"},
		{"\x1b]52;c;ZWNobyBoaQ==\x1b\\after", "after"},
		{"\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"\x1bPq#0;2;0;0;0\x1b\\x", "x"},
		{"\x1b7saved\x1b8\x1bc", "saved"},
		{"\x1b(Bascii", "ascii"},
		{"progress 10%\rprogress 20%\r\n", "progress 10%progress 20%\n"},
		{"bell\x07 back\x08space del\x7f", "bell backspace del"},
		{"\xc2\x9b31mc1 csi\xc2\x9d0;title\x07 done", "c1 csi done"},
		{"\x1b[\nnewline ends a broken CSI", "\nnewline ends a broken CSI"},
		{"a\x1b\nb", "a\nb"},
		{"tail \x1b[", "tail "},
	} {
		var out bytes.Buffer
		s := NewSanitizer(&out)
		s.Write([]byte(tc.in))
		if out.String() != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, out.String(), tc.want)
		}
		// Written a byte at a time: the same.
		var split bytes.Buffer
		s = NewSanitizer(&split)
		for i := range len(tc.in) {
			s.Write([]byte{tc.in[i]})
		}
		if split.String() != tc.want {
			t.Errorf("%q a byte at a time: %q, want %q", tc.in, split.String(), tc.want)
		}
	}
	// An escape sequence that never ends hides at most maxString bytes.
	var out bytes.Buffer
	NewSanitizer(&out).Write([]byte("\x1b]0;" + strings.Repeat("x", 2*maxString) + "\nvisible"))
	if !strings.HasSuffix(out.String(), "\nvisible") || out.Len() > maxString+10 {
		t.Errorf("an endless OSC: %d bytes out, ends %q", out.Len(), out.String()[max(0, out.Len()-20):])
	}
}

// Whatever goes in, nothing a terminal acts on comes out, and text without controls passes
// whole.
func TestSanitizerProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab \t\n\x1b\x07\r[];P\\\xc2\x9b\x9d0m✓")
	for range 2000 {
		in := make([]byte, r.IntN(64))
		for i := range in {
			in[i] = alphabet[r.IntN(len(alphabet))]
		}
		var out bytes.Buffer
		NewSanitizer(&out).Write(in)
		for _, b := range out.Bytes() {
			if b < 0x20 && b != '\n' && b != '\t' || b == 0x7f {
				t.Fatalf("%q let through %q", in, out.Bytes())
			}
		}
		if bytes.Contains(out.Bytes(), []byte{0xc2, 0x9b}) || bytes.Contains(out.Bytes(), []byte{0xc2, 0x9d}) {
			t.Fatalf("%q let a C1 control through: %q", in, out.Bytes())
		}
	}
	text := "ünïcode ✓ and tabs\t and lines\n"
	var out bytes.Buffer
	NewSanitizer(&out).Write([]byte(text))
	if out.String() != text || !utf8.Valid(out.Bytes()) {
		t.Fatalf("text changed: %q", out.String())
	}
}
