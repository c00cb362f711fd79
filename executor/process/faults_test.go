package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/infra"
)

// A trainer that fails writing its checkpoint to a full disk (a real tmpfs, filled) failed for
// the disk's sake: Wait says so with an *infra.Error naming the directory, and the executor
// spends no try on it. The same trainer failing with room left is its own failure.
func TestTrainerOnFullDiskIsInfra(t *testing.T) {
	r := runtime(t)
	if err := os.MkdirAll(r.WorkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", r.WorkDir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (root needed): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", r.WorkDir).Run() })
	// The disk is nearly full (its last 600 KB room for the runtime's own small files); the
	// trainer's checkpoint is larger: its write fails with ENOSPC, and so does it.
	filler := filepath.Join(r.WorkDir, "filler")
	if err := os.WriteFile(filler, make([]byte, 2<<20-600<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	// The trainer fills the disk only once the runtime has written the gang's pids file (after
	// the workers start): filled sooner, that write fails and the launch itself is the disk's.
	_, err := runGang(t, r, testGang("t1", 1, `until [ -e "$RB_CHECKPOINT_DIR/../pids" ]; do sleep 0.01; done
head -c 3000000 /dev/zero > "$RB_CHECKPOINT_DIR/model" || exit 7`))
	e, ok := infra.Is(err)
	if !ok || e.What != infra.DiskFull || !strings.HasPrefix(e.Where, r.WorkDir) || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("a trainer failing on a full disk: %v, want a disk-full fault at %s that keeps the trainer's exit", err, r.WorkDir)
	}
	os.Remove(filler)
	os.RemoveAll(filepath.Join(r.WorkDir, "t1", "checkpoint", "model"))
	_, err = runGang(t, r, testGang("t2", 1, `exit 7`))
	if _, ok := infra.Is(err); ok || err == nil {
		t.Fatalf("a trainer failing with room left: %v, want its own failure", err)
	}
}
