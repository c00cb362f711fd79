package e2e

import (
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"testing"
)

// report --plots on a real run draws its four pictures.
func TestReportPlots(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	if _, errOut, code := rb(t, "run", "e2e/testdata/synthetic.yaml", "--state", state, "--time-scale", "0.02"); !finishedCode(code) {
		t.Fatal(errOut)
	}
	plots := filepath.Join(t.TempDir(), "plots")
	if out, errOut, code := rb(t, "report", state, "--plots", plots); code != 0 || out == "" {
		t.Fatalf("report exit %d: %s", code, errOut)
	}
	for _, f := range []string{"curves.png", "gantt-planned.png", "gantt-realized.png", "cost.png"} {
		fh, err := os.Open(filepath.Join(plots, f))
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := image.DecodeConfig(fh)
		fh.Close()
		if err != nil || cfg.Width != 960 || cfg.Height < 576 {
			t.Errorf("%s: %dx%d %v", f, cfg.Width, cfg.Height, err)
		}
	}
}
