package worker

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A worker whose checkpoint store is on a full disk (a real tmpfs, filled) cannot save what its
// trainer reached: it exits ExitInfra and says what is full and where, so that the runtime
// spends no try of the trial's on it.
func TestSaveOnFullDiskExitsInfra(t *testing.T) {
	store := filepath.Join(t.TempDir(), "checkpoints")
	os.MkdirAll(store, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", store).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (root needed): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", store).Run() })
	os.WriteFile(filepath.Join(store, "filler"), make([]byte, 1<<20), 0o600) // fills it, or fails with ENOSPC doing so
	t.Setenv("RB_TARGET_ITER", "1")
	code, out := runWorker(t, store, Options{Rank: 0, WorkDir: t.TempDir()}, `head -c 200000 /dev/urandom > "$RB_CHECKPOINT_DIR/model"; echo '@rb {"iter": 1, "metrics": {"score": 1}}'`)
	if code != ExitInfra || !strings.Contains(out, InfraPrefix+"disk full at "+store) {
		t.Fatalf("exit %d, want %d saying the disk is full at %s:\n%s", code, ExitInfra, store, out)
	}
}
