package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed figures of the paper's what-ifs (examples/paper/whatif) are what `make figures`
// writes today, byte for byte (seeded plans, deterministic charts): a change to the model, the
// planners or the charts that moves them fails here until they are regenerated. Before, 16 of
// them were stale. The script's own commands run, into a temporary folder (plain build: 9 s).
func TestCommittedFiguresAreCurrent(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	cmd := exec.Command("bash", "examples/paper/whatif/figures.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "RB="+timed(t), "FIGURES_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("figures.sh: %v\n%s", err, b)
	}
	written, err := filepath.Glob(filepath.Join(out, "*"))
	if err != nil || len(written) < 16 {
		t.Fatalf("%d figures written (%v)", len(written), err)
	}
	for _, f := range written {
		name := filepath.Base(f)
		got, _ := os.ReadFile(f)
		want, err := os.ReadFile(filepath.Join("../examples/paper/whatif", name))
		if err != nil {
			t.Errorf("%s is written but not committed: %v", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("examples/paper/whatif/%s is stale: run make figures and commit it", name)
		}
	}
}
