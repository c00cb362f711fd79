package logcap

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// However much is written, the log and its one rotated part stay within the bound, the newest
// output is kept, and the log says it was rotated.
func TestBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.log")
	l, err := Open(path, 1000, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		line := []byte(strings.Repeat("x", 20) + "\n")
		if i == 499 {
			line = []byte("last line\n")
		}
		if n, err := l.Write(line); err != nil || n != len(line) {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
	}
	l.Close()
	for _, p := range []string{path, path + ".1"} {
		if st, err := os.Stat(p); err != nil || st.Size() > 1000 {
			t.Fatalf("%s: %v, %d bytes (bound 1000)", p, err, st.Size())
		}
	}
	b, _ := os.ReadFile(path)
	if !bytes.Contains(b, []byte("reached its bound of 1000 bytes")) || !bytes.HasSuffix(b, []byte("last line\n")) {
		t.Fatalf("the log after rotations:\n%s", b)
	}
}

// A single write larger than the bound keeps its end, says what was cut, and stays bounded.
func TestHugeWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.log")
	l, _ := Open(path, 1000, 0o600)
	huge := append(bytes.Repeat([]byte("y"), 10000), []byte("END\n")...)
	if n, err := l.Write(huge); err != nil || n != len(huge) {
		t.Fatalf("write: %d %v", n, err)
	}
	l.Close()
	b, _ := os.ReadFile(path)
	if len(b) > 1000 || !bytes.HasSuffix(b, []byte("END\n")) || !bytes.Contains(b, []byte("cut to its last 500 bytes")) {
		t.Fatalf("%d bytes:\n%s", len(b), b)
	}
}

// A log opened again counts what it holds already: a trial's launches append to one log.
func TestReopenCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.log")
	os.WriteFile(path, bytes.Repeat([]byte("z"), 900), 0o600)
	l, _ := Open(path, 1000, 0o600)
	l.Write(bytes.Repeat([]byte("w"), 200))
	l.Close()
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatalf("900 bytes then 200 under a bound of 1000 did not rotate: %v", err)
	}
}
