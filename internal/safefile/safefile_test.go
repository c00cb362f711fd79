package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Read refuses what is not a regular file, or is too big, before it reads a byte: a FIFO would
// block the open, /dev/zero would never end.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	small, big := filepath.Join(dir, "small"), filepath.Join(dir, "big")
	os.WriteFile(small, []byte("hello"), 0o600)
	os.WriteFile(big, make([]byte, 2<<20+1), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(small, link)
	for _, tc := range []struct {
		path, want string
	}{
		{fifo, fifo + " is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "/dev/zero is a character device, not a regular file"},
		{dir, dir + " is a directory, not a regular file"},
		{big, big + " is 2097153 bytes, above the limit of 2097152 bytes (2 MiB) for a test file"},
		{filepath.Join(dir, "none"), "no such file"},
	} {
		if _, err := Read(tc.path, 2<<20, "a test file"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
	for _, p := range []string{small, link} {
		if b, err := Read(p, 5, "a test file"); err != nil || string(b) != "hello" {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
	if _, err := Read(small, 4, "a test file"); err == nil || !strings.Contains(err.Error(), "above the limit of 4 bytes for a test file") {
		t.Errorf("over a limit in bytes: %v", err)
	}
}
