package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/rundir"
	"go.yaml.in/yaml/v3"
)

// A job of two objectives and a cost constraint through the CLI (the virtual backend): report
// lists the Pareto front and each parameter's importance for each objective, best prints it as a table with an arrow for each objective's way,
// best -o json gives each member's metrics and curve, and best --pick names one configuration
// ready to reuse: the front's most accurate for val_accuracy, its cheapest in latency for
// latency_ms. A pick of no objective is a usage error naming the objectives.
func TestMultiObjectiveThroughTheCLI(t *testing.T) {
	t.Parallel()
	spec := "executor/virtual/testdata/multiobjective-sha.yaml"
	root := t.TempDir()
	state := filepath.Join(root, "mo")
	out, errOut, code := rb(t, "run", spec, "--backend", "virtual", "--state", state)
	if !finishedCode(code) || !strings.Contains(out, "Pareto front: ") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	table, errOut, code := rb(t, "best", state)
	if code != 0 || !strings.Contains(table, "VAL_ACCURACY ↑") || !strings.Contains(table, "LATENCY_MS ↓") || !strings.Contains(table, "COST_USD") ||
		!strings.Contains(table, "best --pick val_accuracy") {
		t.Fatalf("best: exit %d\n%s\n%s", code, table, errOut)
	}
	js, _, code := rb(t, "best", state, "-o", "json")
	var best rundir.BestTrial
	if err := json.Unmarshal([]byte(js), &best); err != nil || code != 0 || len(best.Pareto) < 2 || len(best.Objectives) != 2 {
		t.Fatalf("best -o json: exit %d, %v\n%s", code, err, js)
	}
	top, cheapest := best.Pareto[0], best.Pareto[0]
	for _, m := range best.Pareto {
		if len(m.Curve) == 0 || m.Metrics["cost_usd"] <= 0 || m.Metrics["cost_usd"] > 0.09 {
			t.Errorf("front member %+v: no curve, or its cost is not metered within the cap", m)
		}
		if !strings.Contains(table, m.Trial) {
			t.Errorf("the table leaves out %s", m.Trial)
		}
		if m.Metrics["val_accuracy"] > top.Metrics["val_accuracy"] {
			top = m
		}
		if m.Metrics["latency_ms"] < cheapest.Metrics["latency_ms"] {
			cheapest = m
		}
	}
	for metric, want := range map[string]rundir.ParetoMember{"val_accuracy": top, "latency_ms": cheapest} {
		picked, errOut, code := rb(t, "best", state, "--pick", metric)
		var params map[string]any
		if err := yaml.Unmarshal([]byte(picked), &params); err != nil || code != 0 || !strings.Contains(picked, "trial "+want.Trial+", "+metric) {
			t.Fatalf("best --pick %s: exit %d, %v\n%s%s", metric, code, err, picked, errOut)
		}
		if params["lr"] != want.Params["lr"] {
			t.Errorf("best --pick %s: %v, want %v", metric, params, want.Params)
		}
	}
	if _, errOut, code := rb(t, "best", state, "--pick", "params"); code != 2 || !strings.Contains(errOut, "not one of the run's objectives (val_accuracy, latency_ms)") {
		t.Errorf("best --pick params: exit %d: %s", code, errOut)
	}
	report, _, _ := rb(t, "report", state)
	if !strings.Contains(report, "Pareto front: ") || !strings.Contains(report, top.Trial) || !strings.Contains(report, "PARAMETER  VAL_ACCURACY  LATENCY_MS") {
		t.Errorf("report:\n%s", report)
	}
	// The dashboard draws the front: the two objectives against each other, the parallel
	// coordinates, and the front's table linking each member's learning curve (drawn in the
	// curves chart, its path the link's target) and log.
	page := dashboardPage(t, root, "mo")
	for _, want := range []string{`id="pareto-scatter"`, `id="pareto-parallel"`, `id="pareto-front"`, "latency_ms (min) against val_accuracy (max)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run's page has no %s", want)
		}
	}
	for _, m := range best.Pareto {
		if !strings.Contains(page, "/runs/mo/trials/"+m.Trial+"/log") {
			t.Errorf("the page's front does not link %s's log", m.Trial)
		}
		if !strings.Contains(page, `href="#curve-`+m.Trial+`"`) || !strings.Contains(page, `<path id="curve-`+m.Trial+`"`) {
			t.Errorf("the page's front does not link %s's learning curve, or the chart lacks it", m.Trial)
		}
	}
}

// A run of two objectives submitted to a team's server: best against the server prints what best
// prints on the server's machine (the front's table, and --pick's configuration), and the Python
// client's pareto() gives the front, configuration by configuration, in best -o json's order.
func TestParetoThroughTheServer(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	srv, cls := teamServer(t, []string{"--root", root}, nil, map[string][]string{"ml": nil, "other": nil})
	cl := cls["ml"]
	spec := strings.NewReplacer("name: tiny", "name: front", "objective: {metric: score, mode: max}",
		"objectives: [{metric: score, mode: max}, {metric: latency_ms, mode: min}]",
		"{sha: {trials: 2, min_iters: 1, max_iters: 2, eta: 2}}", "{stages: [{trials: 8, iters: 1}, {trials: 5, iters: 2}]}",
		"e2e/testdata/synthetic.yaml", "e2e/testdata/synthetic-mo.yaml").Replace(tinySpec)
	run := submitFinished(t, srv, cl, spec)
	dir := filepath.Join(root, "teams", "ml", run.ID)
	remote := []string{"RUBBERBAND_SERVER=" + srv.base, "RUBBERBAND_TOKEN=" + cl.Token}
	for _, args := range [][]string{{"best"}, {"best", "--pick", "latency_ms"}, {"best", "-o", "json"}} {
		here, errOut, code := rb(t, append(args, dir)...)
		there, errOut2, code2 := rbEnv(t, binary, remote, append(args, "front")...)
		if code != 0 || code2 != 0 || here != there {
			t.Errorf("%v: here (exit %d) %s%s\non the server (exit %d) %s%s", args, code, here, errOut, code2, there, errOut2)
		}
	}
	// Another team reaches none of it: not by the run's ID, not by its name.
	other := []string{"RUBBERBAND_SERVER=" + srv.base, "RUBBERBAND_TOKEN=" + cls["other"].Token}
	for _, ref := range []string{run.ID, "front"} {
		if out, errOut, code := rbEnv(t, binary, other, "best", ref, "-o", "json"); code == 0 || strings.Contains(out+errOut, "pareto") {
			t.Errorf("team other's best %s: exit %d\n%s%s", ref, code, out, errOut)
		}
	}
	js, _, _ := rb(t, "best", dir, "-o", "json")
	var best rundir.BestTrial
	if err := json.Unmarshal([]byte(js), &best); err != nil || len(best.Pareto) < 2 {
		t.Fatalf("best -o json: %v, a front of %d\n%s", err, len(best.Pareto), js)
	}
	script := `import json, os
from rubberband import Client
run = Client().run(os.environ["RUN"])
front = run.pareto()
rows = front.to_dict("records") if hasattr(front, "to_dict") else front
print(json.dumps([[r["trial"], r["score"], r["latency_ms"]] for r in rows]))
`
	py := exec.Command("/usr/bin/python3", "-c", script)
	py.Dir = ".."
	py.Env = append(os.Environ(), append(remote, "RUN="+run.ID, "PYTHONPATH=python", "PYTHONDONTWRITEBYTECODE=1")...)
	out, err := py.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var rows [][]any
	if err := json.Unmarshal(out, &rows); err != nil || len(rows) != len(best.Pareto) {
		t.Fatalf("pareto() gave %s (%v); best -o json has %d", out, err, len(best.Pareto))
	}
	for i, m := range best.Pareto {
		if rows[i][0] != m.Trial || rows[i][1] != m.Metrics["score"] || rows[i][2] != m.Metrics["latency_ms"] {
			t.Errorf("pareto() row %d %v; best -o json %s %v", i, rows[i], m.Trial, m.Metrics)
		}
	}
}
