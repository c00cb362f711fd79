package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir"
)

// An ASHA run whose trainer is broken fails as SHA's does: exit 1 once its first three trials
// failed the same way, the error naming the log to read and quoting the trainer's last line, `failed` in list with no rung reached.
// A finished ASHA run is listed with its rungs reached, not "0/3" (ASHA never syncs). Before,
// the broken run ran every trial's every try and ended "finished", exit 0, green.
func TestASHAEndsAsSHADoes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root}
	text, err := os.ReadFile(filepath.Join("../..", ashaQuickstart))
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	s := strings.Replace(string(text), "name: asha-quickstart", "name: broken", 1)
	s = strings.Replace(s, "command: [rubberband, trainer, synthetic, --spec, examples/asha-quickstart.yaml]",
		`command: [sh, -c, "echo 'ModuleNotFoundError: torch' >&2; exit 1"]`, 1)
	if err := os.WriteFile(broken, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := rbEnv(t, binary, env, "run", broken, "--time-scale", "0.02")
	if code != 1 || !strings.Contains(errOut, "all failed the same way") || !strings.Contains(errOut, "rubberband logs ") || !strings.Contains(errOut, "ModuleNotFoundError: torch") {
		t.Fatalf("broken ASHA run: exit %d, want 1 naming the log:\n%s", code, errOut)
	}
	if out, errOut, code := rbEnv(t, binary, env, "run", ashaQuickstart, "--backend", "virtual"); code != 0 && code != 5 {
		t.Fatalf("ASHA run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := rbEnv(t, binary, env, "list", "-o", "json")
	var rows []rundir.Summary
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	for _, r := range rows {
		switch r.Name {
		case "broken":
			if r.Status != "failed" || r.Stages != 0 || r.Of != 3 {
				t.Errorf("broken run listed %s %d/%d, want failed 0/3", r.Status, r.Stages, r.Of)
			}
		default:
			if r.Status != "finished" || r.Stages != 3 || r.Of != 3 {
				t.Errorf("finished run listed %s %d/%d, want finished 3/3", r.Status, r.Stages, r.Of)
			}
		}
	}
}
