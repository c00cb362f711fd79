package rundir

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A log prints whole or from its last lines; one not written yet is ErrNoOutput.
func TestPrintLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, DriverLog)
	if err := PrintLog(context.Background(), dir, path, -1, false, &bytes.Buffer{}); !errors.Is(err, ErrNoOutput) {
		t.Fatalf("no log: %v, want ErrNoOutput", err)
	}
	if err := os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for tail, want := range map[int]string{-1: "one\ntwo\nthree\n", 2: "two\nthree\n", 0: ""} {
		var out bytes.Buffer
		if err := PrintLog(context.Background(), dir, path, tail, false, &out); err != nil || out.String() != want {
			t.Errorf("tail %d: %q, %v, want %q", tail, out.String(), err, want)
		}
	}
}
