package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A plan file is read only when it is a regular file under MaxPlanFile: a FIFO is refused at
// once (opening it would block until a writer comes), a huge file before it is read into memory.
func TestReadPlanFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "plan.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(MaxPlanFile + 1) // sparse: no disk used
	f.Close()
	for _, tc := range []struct{ path, want string }{
		{fifo, "is a named pipe (FIFO), not a regular file"},
		{"/dev/zero", "is a character device, not a regular file"},
		{huge, "above the limit of 4194304 bytes (4 MiB) for a plan file"},
	} {
		// Synchronous: a read that blocked (the FIFO opened) would hang here until the test
		// binary's -timeout names this test; no wall-clock wait of its own.
		if _, err := ReadPlanFile(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
	ok := filepath.Join(dir, "plan.json")
	os.WriteFile(ok, []byte(`{"experiment":"x","brackets":[{"name":"sha","stages":[{"trials":1,"iters":1,"gpus":1,"nodes":1}]}]}`), 0o600)
	if rep, err := ReadPlanFile(ok); err != nil || rep.Experiment != "x" {
		t.Fatalf("a plan file: %+v, %v", rep, err)
	}
}
