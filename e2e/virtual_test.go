package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// --backend virtual through the CLI: the paper's Table 2 job finishes with realized JCT and cost
// within 3% of the plan's mean; the same command twice writes byte-identical journals; list,
// status, report --plots and the dashboard work on it as on any run; --faults SEED prints its
// schedule and what it did, finishes with the clean run's winner, and replays by its seed.
func TestVirtualBackend(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root}
	run := func(args ...string) (string, string) {
		t.Helper()
		out, errOut, code := rbEnv(t, binary, env, append([]string{"run", table2, "--backend", "virtual"}, args...)...)
		if !finishedCode(code) { // a plan that meets the deadline at p50 may miss it in one world
			t.Fatalf("run %v: exit %d\n%s\n%s", args, code, errOut, out)
		}
		return out, errOut
	}
	dirs := func() []string {
		entries, _ := os.ReadDir(root)
		var out []string
		for _, e := range entries {
			out = append(out, filepath.Join(root, e.Name()))
		}
		return out
	}
	journal := func(dir string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, rundir.Journal))
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %v", dir, err)
		}
		return b
	}

	_, errOut := run()
	if !regexp.MustCompile(`virtual: .* of virtual time in .* of wall time, 1 driver`).MatchString(errOut) {
		t.Errorf("the run does not say its virtual and wall time:\n%s", errOut)
	}
	run()
	if d := dirs(); len(d) != 2 || !bytes.Equal(journal(d[0]), journal(d[1])) {
		t.Fatalf("the same command twice: %d runs, journals differ", len(d))
	}
	first := dirs()[0]
	rep := readRunReport(t, first)
	var plan planner.Report
	if b, err := os.ReadFile(filepath.Join(first, rundir.PlanFile)); err != nil || json.Unmarshal(b, &plan) != nil {
		t.Fatalf("plan.json: %v", err)
	}
	jct, cost := plan.Predicted.JCT, plan.Predicted.Cost
	t.Logf("JCT %.0f s (p5..p95 %.0f..%.0f), cost $%.2f ($%.2f..$%.2f)", rep.Realized.JCT, jct.P5, jct.P95, rep.Realized.Cost, cost.P5, cost.P95)
	// One world's run: near the prediction's mean, not inside its p5..p95 (greedy's plan realizes
	// this seed's cost a cent above p95; the mean over eight worlds is checked in executor/virtual).
	if !rep.Finished || rep.Best == nil || math.Abs(rep.Realized.JCT/jct.Mean-1) > 0.03 || math.Abs(rep.Realized.Cost/cost.Mean-1) > 0.03 {
		t.Fatalf("finished %v, best %+v, realized %+v more than 3%% off the plan's mean (JCT %.0f s, $%.2f)", rep.Finished, rep.Best, rep.Realized, jct.Mean, cost.Mean)
	}

	list, errOut, code := rbEnv(t, binary, env, "list")
	if code != 0 || strings.Count(list, "finished") != 2 {
		t.Errorf("list: exit %d\n%s%s", code, list, errOut)
	}
	status, _, code := rb(t, "status", first)
	if code != 0 || !strings.Contains(status, rep.Best.Trial) || !strings.Contains(status, "realized") {
		t.Errorf("status: exit %d\n%s", code, status)
	}
	plots := filepath.Join(t.TempDir(), "plots")
	if _, errOut, code := rb(t, "report", first, "--plots", plots); code != 0 {
		t.Fatalf("report --plots: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(plots, "gantt-realized.png")); err != nil {
		t.Error(err)
	}
	url := startUI(t, nil, "--root", root, "--addr", "127.0.0.1:0")
	base, _, _ := strings.Cut(url, "?")
	resp, err := http.Get(base + "runs/" + filepath.Base(first))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), rep.Best.Trial) {
		t.Errorf("the dashboard's page of the run: %d, best trial %s not on it", resp.StatusCode, rep.Best.Trial)
	}

	// Faults: the schedule said, the clean run's winner kept, the same journal under the same seed.
	var faulty []string
	for i := 0; i < 2; i++ {
		state := filepath.Join(t.TempDir(), "faults")
		_, errOut := run("--faults", "7", "--state", state)
		if !strings.Contains(errOut, "faults (seed 7): ") || !strings.Contains(errOut, "fault: ") {
			t.Fatalf("the faults are not said:\n%s", errOut)
		}
		if got := readRunReport(t, state); got.Best == nil || got.Best.Trial != rep.Best.Trial || got.Best.Metric != rep.Best.Metric {
			t.Fatalf("with faults the best is %+v, without %+v", got.Best, rep.Best)
		}
		faulty = append(faulty, string(journal(state)))
	}
	if faulty[0] != faulty[1] {
		t.Fatal("--faults 7 twice: the journals differ")
	}
}
