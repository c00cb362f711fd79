package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// submitFinished submits spec to the server as cl's user and waits until the run has finished
// (the test fails on any other end).
func submitFinished(t *testing.T, srv *serverProc, cl *client.Client, spec string) client.Run {
	t.Helper()
	run, _, err := cl.Submit(context.Background(), server.Submission{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if end := waitRun(t, cl, run.ID, "ended", func(r client.Run) bool { return r.State.Ended() }); end.State != store.Finished {
		t.Fatalf("the run: %+v\n%s", end, srv.log)
	}
	return run
}

// statePath is where a status or report table says the run's state is: on this machine a
// folder, on a server the run's folder under its root.
var statePath = regexp.MustCompile(`state in \S+`)

// One run, read on the server's machine (its state directory) and through the server by its
// name: status (tables, --trials, JSON), report (tables, JSON), best (YAML, JSON) and logs -n
// print the same, but for where the state is. On main status and report were 2-4 line stubs
// against a server, a name was "no run", and logs -n printed the whole log.
func TestServerPrintsWhatLocalPrints(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	srv, cls := teamServer(t, []string{"--root", root}, nil, map[string][]string{"ml": nil})
	cl := cls["ml"]
	ctx := context.Background()
	run := submitFinished(t, srv, cl, strings.Replace(tinySpec, "name: tiny", "name: parity", 1))
	dir := filepath.Join(root, "teams", "ml", run.ID)
	remote := []string{"RUBBERBAND_SERVER=" + srv.base, "RUBBERBAND_TOKEN=" + cl.Token}
	// Each command here and there, side by side (a race build's CLI takes a second to exit).
	t.Run("same", func(t *testing.T) {
		for _, args := range [][]string{
			{"status"}, {"status", "--trials"}, {"status", "-o", "json"}, {"status", "--watch", "--interval", "10ms", "-o", "json"},
			{"report"}, {"report", "-o", "json"},
			{"best"}, {"best", "-o", "json"},
			{"logs", "-n", "3"}, {"logs", "-n", "0"}, {"logs", "-n", "2", "b0-t0000"},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Parallel()
				onto := func(run string) []string { return append(append([]string{}, args...), run) }
				if args[0] == "logs" && args[2] == "2" { // a trial's log
					onto = func(run string) []string { return append(append([]string{}, args[:3]...), run, args[3]) }
				}
				here, errOut, code := rb(t, onto(dir)...)
				if code != 0 {
					t.Fatalf("here: exit %d: %s", code, errOut)
				}
				there, errOut, code := rbEnv(t, binary, remote, onto("parity")...)
				if code != 0 {
					t.Fatalf("on the server, by name: exit %d: %s", code, errOut)
				}
				here, there = statePath.ReplaceAllString(here, "state in DIR"), statePath.ReplaceAllString(there, "state in DIR")
				if here != there || strings.TrimSpace(here) == "" && args[0] != "logs" {
					t.Errorf("here:\n%s\non the server:\n%s", here, there)
				}
			})
		}
	})

	// run, followed to its end, prints what report prints here.
	// Sent from the CLI, its trainer runs in the spec's folder as sent (its code bundle): the
	// synthetic trainer's spec is named absolutely.
	synthetic, err := filepath.Abs("testdata/synthetic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(spec, []byte(strings.Replace(tinySpec, "e2e/testdata/synthetic.yaml", synthetic, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ran, errOut, code := rbEnv(t, binary, remote, "run", spec)
	first := regexp.MustCompile(`submitted (\S+) `).FindStringSubmatch(errOut)
	if code != 0 || first == nil {
		t.Fatalf("run on the server: exit %d: %s", code, errOut)
	}
	here, _, _ := rb(t, "report", filepath.Join(root, "teams", "ml", first[1]))
	if a, b := statePath.ReplaceAllString(here, "state in DIR"), statePath.ReplaceAllString(ran, "state in DIR"); a != b || !strings.Contains(a, "best trial") {
		t.Errorf("report here:\n%s\nrun on the server:\n%s", a, b)
	}

	// A name two runs have is refused with both IDs, as an ambiguous ID's start is here.
	twins := []string{first[1]}
	r, _, err := cl.Submit(ctx, server.Submission{Spec: tinySpec})
	if err != nil {
		t.Fatal(err)
	}
	twins = append(twins, r.ID)
	defer cl.Cancel(ctx, r.ID)
	_, errOut, code = rbEnv(t, binary, remote, "status", "tiny")
	if code != 2 || !strings.Contains(errOut, twins[0]) || !strings.Contains(errOut, twins[1]) {
		t.Fatalf("status of a name two runs have: exit %d: %s", code, errOut)
	}
	// The log is longer than the tails compared above, and a tail is bounded.
	if all, _, _ := rb(t, "logs", dir); strings.Count(all, "\n") <= 3 {
		t.Fatalf("the driver log has %d lines: the tails show nothing", strings.Count(all, "\n"))
	}
	for _, n := range []string{"-1", "x", "1000001"} {
		if code := api(t, srv.base, cl.Token, "GET", "/api/v1/runs/"+run.ID+"/logs?tail="+n, "", nil); code != 400 {
			t.Errorf("logs?tail=%s: %d", n, code)
		}
	}
}

// A refusal that the team's quota or budget causes names it and its figures, through the
// server: on main a spec that meets its deadline on its own 4 GPUs, held to the team's 1, said
// only "no plan meets the deadline", and a budget refusal said nothing of the month's budget.
func TestServerRefusalNamesTheQuotaOrBudget(t *testing.T) {
	t.Parallel()
	srv, cls := teamServer(t, []string{"--root", t.TempDir()}, nil, map[string][]string{"narrow": {"--max-gpus", "1"}, "poor": {"--budget", "0.01"}})
	// Planned alone, on the spec's max_nodes 4 (1 GPU each), it meets its deadline of 15 s.
	wide := strings.NewReplacer("name: tiny", "name: wide", "deadline: 10m", "deadline: 15s",
		"{sha: {trials: 2, min_iters: 1, max_iters: 2, eta: 2}}", "{sha: {trials: 8, min_iters: 1, max_iters: 8, eta: 2}}",
		"max_nodes: 1", "max_nodes: 4", "{1: {mean: 0.01, std: 0.001}}", "{1: {mean: 1, std: 0.01}}").Replace(tinySpec)
	spec := filepath.Join(t.TempDir(), "wide.yaml")
	if err := os.WriteFile(spec, []byte(wide), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rb(t, "plan", spec); code != 0 {
		t.Fatalf("plan of the spec alone: exit %d: %s", code, errOut)
	}
	as := func(team string) []string {
		return []string{"RUBBERBAND_SERVER=" + srv.base, "RUBBERBAND_TOKEN=" + cls[team].Token}
	}
	_, errOut, code := rbEnv(t, binary, as("narrow"), "run", spec, "--detach")
	if code != 3 || !strings.Contains(errOut, "team narrow's quota (max_gpus 1, 0 in use) holds the plan to 1 node of 1 GPU, not the spec's max_nodes 4; with 1 GPU") ||
		!strings.Contains(errOut, "no plan meets the deadline 15s") {
		t.Fatalf("held to the team's quota: exit %d: %s", code, errOut)
	}
	_, errOut, code = rbEnv(t, binary, as("poor"), "run", spec, "--detach")
	if code != 2 || !regexp.MustCompile(`predicted cost \$[0-9.]+ .* over team poor's remaining budget this month, \$0\.0100 \(of its monthly \$0\.0100: \$0\.0000 charged, \$0\.0000 reserved by its active runs\)`).MatchString(errOut) {
		t.Fatalf("over the team's budget: exit %d: %s", code, errOut)
	}
}
