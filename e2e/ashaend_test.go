package e2e

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
	text, err := os.ReadFile(filepath.Join("..", ashaQuickstart))
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	s := strings.Replace(string(text), "name: asha-quickstart", "name: broken", 1)
	s = strings.Replace(s, "command: [rubberband, trainer, synthetic, --spec, asha-quickstart.yaml]",
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
			ashaRunPage(t, root, r.Name)
			ashaStatusJSON(t, root, r.Name)
		}
	}
}

// ashaRunPage: the dashboard's page of a finished ASHA run counts results by rung as status
// does, says how many rungs were reached, and sets no stage prediction ($0, 0.0 s) or share of
// trials (16 / 12) beside a rung, nor a chart of stage ends it has none of. Before, it showed
// "68 / 63" trial-stages, rungs over 100%, every prediction zero and an empty time chart.
func ashaRunPage(t *testing.T, root, name string) {
	page := runPage(t, root, name)
	status, _, code := rbEnv(t, binary, []string{"RUBBERBAND_ROOT=" + root}, "status", name)
	if code != 0 && code != 5 {
		t.Fatalf("status: exit %d", code)
	}
	for _, want := range []string{"rung results", `id="rungs-table"`, `id="phases"`, "rungs reached <span id=\"rungs\">3 / 3</span>", "Progress by rung"} {
		if !strings.Contains(page, want) {
			t.Errorf("the ASHA run page has no %s", want)
		}
	}
	for _, not := range []string{"trial-stages done", "/ 0.0s", "$0.0000 / $0.0000", `id="time"`} {
		if strings.Contains(page, not) {
			t.Errorf("the ASHA run page shows %q", not)
		}
	}
	// Each rung's results, as status counts them.
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && strings.HasPrefix(f[0], "asha-") {
			row := "<td>" + f[1] + "</td><td>" + f[2] + "</td><td>" + f[3] + "</td><td>" + f[4] + "</td>"
			if !strings.Contains(page, row) {
				t.Errorf("the run page has no rung row %s (status: %s)", row, line)
			}
		}
	}
}

// ashaStatusJSON: status -o json of an ASHA run has its predictions (the run's, non-zero) and no
// rung with a zero prediction of its own: before, every rung's predicted figures were zero.
func ashaStatusJSON(t *testing.T, root, name string) {
	out, _, code := rbEnv(t, binary, []string{"RUBBERBAND_ROOT=" + root}, "status", name, "-o", "json")
	var rep struct {
		Predicted struct {
			JCT  float64 `json:"jct_s"`
			Cost float64 `json:"cost_usd"`
		} `json:"predicted"`
		Stages []map[string]json.RawMessage `json:"stages"`
		Phases []json.RawMessage            `json:"phases"`
	}
	if (code != 0 && code != 5) || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("status -o json: exit %d\n%s", code, out)
	}
	if rep.Predicted.JCT <= 0 || rep.Predicted.Cost <= 0 || len(rep.Phases) == 0 || len(rep.Stages) != 3 {
		t.Errorf("status -o json: predicted %+v, %d phases, %d rungs", rep.Predicted, len(rep.Phases), len(rep.Stages))
	}
	for _, st := range rep.Stages {
		if p, ok := st["predicted"]; ok {
			t.Errorf("a rung with a prediction of its own: %s", p)
		}
	}
}
