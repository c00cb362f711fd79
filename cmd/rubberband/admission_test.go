package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// tinySpec is a 1-GPU run planned from a profile of milliseconds (a plan of 20 samples, quick to
// make), whose trainer sleeps as synthetic.yaml's profile says: its driver and trainers take
// far longer than its predicted JCT, so it runs well past its prediction.
const tinySpec = `name: tiny
deadline: 10m
seed: 3
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 2, min_iters: 1, max_iters: 2, eta: 2}}
search_space:
  x: {type: uniform, min: 0, max: 1}
  y: {type: int, min: 1, max: 100}
trainer: {command: [rubberband, trainer, synthetic, --spec, cmd/rubberband/testdata/synthetic.yaml]}
cluster:
  gpus_per_node: 1
  price_per_hour: 12
  billing: {minimum: 0s}
  scale_latency: {value: 0s}
  init_latency: {value: 0s}
  max_nodes: 1
profile:
  iter_latency: {1: {mean: 0.01, std: 0.001}}
  startup_latency: {value: 0s}
planner: {samples: 20}
`

// teamServer makes teams (each `teams add` argument list after the name) and a user of each
// (TEAM-user; ops's an admin), on the database db names (--root ROOT or --db URL), and starts a
// server on it with serverArgs; it returns the server and each team's client.
func teamServer(t *testing.T, db []string, serverArgs []string, teams map[string][]string) (*serverProc, map[string]*client.Client) {
	t.Helper()
	tokens := map[string]string{}
	for name, args := range teams {
		if _, errOut, code := rb(t, append(append([]string{"server", "teams", "add", name}, db...), args...)...); code != 0 {
			t.Fatalf("teams add %s: %s", name, errOut)
		}
		admin := []string{}
		if name == "ops" {
			admin = []string{"--admin"}
		}
		out, errOut, code := rb(t, append(append([]string{"server", "users", "add", name + "-user", "--team", name}, db...), admin...)...)
		if code != 0 {
			t.Fatalf("users add: %s", errOut)
		}
		tokens[name] = strings.TrimSpace(out)
	}
	srv := startServer(t, append(db, serverArgs...)...)
	cls := map[string]*client.Client{}
	for name, tok := range tokens {
		cls[name], _ = client.New(srv.base, tok)
	}
	return srv, cls
}

// Twenty submissions at once against a budget that holds two runs' reservations, on
// PostgreSQL: what is admitted fits the budget (on main all twenty were, each deciding on what
// it read before any other was queued).
func TestServerBudgetHoldsUnderParallelSubmissions(t *testing.T) {
	t.Parallel()
	pg := servers.StartPostgres(t)
	db := []string{"--db", pg.URL}
	srv, cls := teamServer(t, db, []string{"--root", t.TempDir(), "--max-queued-per-user", "0"}, map[string][]string{"probe": nil, "ml": {"--budget", "1000"}})
	ctx := context.Background()
	probe, _, err := cls["probe"].Submit(ctx, server.Submission{Spec: tinySpec})
	if err != nil || probe.PredictedCostUSD <= 0 {
		t.Fatalf("probe: %+v %v", probe, err)
	}
	budget := 2.5 * probe.PredictedCostUSD
	if _, errOut, code := rb(t, "server", "teams", "set", "ml", "--budget", fmt.Sprint(budget), "--db", pg.URL); code != 0 {
		t.Fatal(errOut)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted []client.Run
		refused  int
	)
	for range 20 {
		wg.Go(func() {
			r, _, err := cls["ml"].Submit(ctx, server.Submission{Spec: tinySpec})
			mu.Lock()
			defer mu.Unlock()
			var ce *client.Error
			switch {
			case err == nil:
				admitted = append(admitted, r)
			case errors.As(err, &ce) && ce.Refusal != nil && ce.Refusal.Reason == "budget":
				refused++
			default:
				t.Errorf("submission: %v", err)
			}
		})
	}
	wg.Wait()
	reserved := 0.0
	for _, r := range admitted {
		reserved += r.PredictedCostUSD
	}
	if len(admitted) == 0 || refused == 0 || reserved > budget+1e-9 {
		t.Fatalf("%d admitted reserving $%.4f of a $%.4f budget, %d refused\n%s", len(admitted), reserved, budget, refused, srv.log)
	}
}

// Three 1-GPU runs under max_gpus 1, each running well past its predicted JCT, never run at
// once (on main a run past its prediction stopped counting, and the next started beside it).
func TestServerQuotaHoldsPastPredictedJCT(t *testing.T) {
	t.Parallel()
	_, cls := teamServer(t, []string{"--root", t.TempDir()}, nil, map[string][]string{"ml": {"--max-gpus", "1"}})
	ctx := context.Background()
	cl := cls["ml"]
	var ids []string
	for range 3 {
		r, _, err := cl.Submit(ctx, server.Submission{Spec: tinySpec})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	var runs []client.Run
	for _, id := range ids {
		runs = append(runs, waitRun(t, cl, id, "ended", func(r client.Run) bool { return r.State.Ended() }))
	}
	for i, a := range runs {
		if a.State != store.Finished || a.GPUs != 1 {
			t.Fatalf("run %s: %+v", a.ID, a)
		}
		if took := a.EndedAt.Sub(a.StartedAt).Seconds(); took <= a.PredictedJCTSeconds {
			t.Fatalf("run %s took %.2fs, not past its predicted %.2fs: the test shows nothing", a.ID, took, a.PredictedJCTSeconds)
		}
		for _, b := range runs[i+1:] {
			if a.StartedAt.Before(b.EndedAt) && b.StartedAt.Before(a.EndedAt) {
				t.Fatalf("runs %s (%v to %v) and %s (%v to %v) ran at once under max_gpus 1", a.ID, a.StartedAt, a.EndedAt, b.ID, b.StartedAt, b.EndedAt)
			}
		}
	}
}

// api sends an admin's request and decodes the answer into out; it returns the status.
func api(t *testing.T, base, token, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// `teams set --budget` and a PUT that gives one field change only that field (on main the
// others were reset to 0, unlimited); every admin action, the CLI's included, is in the audit
// log of the team it concerns, and a refused cancel in its victim's.
func TestServerTeamChangesArePartialAndAudited(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	srv, cls := teamServer(t, []string{"--root", root}, nil, map[string][]string{
		"ops": nil, "ml": {"--max-gpus", "4", "--max-nodes", "2", "--budget", "100"}, "cv": nil})
	if _, errOut, code := rb(t, "server", "teams", "set", "ml", "--budget", "50", "--root", root); code != 0 || !strings.Contains(errOut, "max_gpus 4, max_nodes 2, monthly budget $50.00") {
		t.Fatalf("teams set --budget: exit %d: %s", code, errOut)
	}
	admin := cls["ops"].Token
	var after store.Team
	if code := api(t, srv.base, admin, "PUT", "/api/v1/teams/ml", `{"max_nodes": 3}`, &after); code != 200 {
		t.Fatalf("PUT: %d", code)
	}
	var teams []store.Team
	api(t, srv.base, admin, "GET", "/api/v1/teams", "", &teams)
	for _, tm := range teams {
		if tm.Name == "ml" && (tm.MaxGPUs != 4 || tm.MaxNodes != 3 || tm.MonthlyBudgetUSD != 50) {
			t.Fatalf("team ml after set --budget 50 and PUT max_nodes 3: %+v", tm)
		}
	}
	if code := api(t, srv.base, admin, "POST", "/api/v1/users", `{"name": "mallory", "team": "ml"}`, nil); code != 201 {
		t.Fatalf("POST user: %d", code)
	}
	// cv's user names ml's run in a cancel: refused, and ml sees it.
	run, _, err := cls["ml"].Submit(context.Background(), server.Submission{Spec: tinySpec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cls["cv"].Cancel(context.Background(), run.ID); err == nil {
		t.Fatal("cv cancelled ml's run")
	}
	audit, err := cls["ml"].Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, e := range audit {
		seen[e.Action] += e.User + ";"
	}
	for action, by := range map[string]string{"team-create": "cli:", "team-update": "cli:", "user-create": "ops-user", "cancel-refused": "cv-user"} {
		if !strings.Contains(seen[action], by) {
			t.Errorf("team ml's audit has no %s by %s: %+v", action, by, audit)
		}
	}
	if !strings.Contains(seen["team-update"], "ops-user") {
		t.Errorf("team ml's audit lacks the admin's PUT: %+v", audit)
	}
}

// checkpoints.url and warm_start paths only under the team's storage prefixes and never inside
// the server's root: another team's run folder, '..' out of a prefix, a symlink in the prefix
// into the root are refused, naming the field and line (on main all were taken).
func TestServerStoragePrefixes(t *testing.T) {
	t.Parallel()
	root, shared := t.TempDir(), t.TempDir()
	alpha := filepath.Join(shared, "alpha")
	os.MkdirAll(alpha, 0o755)
	os.Symlink(root, filepath.Join(alpha, "link"))
	_, cls := teamServer(t, []string{"--root", root}, nil, map[string][]string{
		"alpha": {"--storage-prefix", "file://" + alpha, "--storage-prefix", "s3://ckpts/alpha"}, "beta": nil})
	beta, _, err := cls["beta"].Submit(context.Background(), server.Submission{Spec: tinySpec})
	if err != nil {
		t.Fatal(err)
	}
	betaDir := filepath.Join(root, "teams", "beta", beta.ID)
	line := fmt.Sprintf("spec.yaml:%d:", strings.Count(tinySpec, "\n")+1) // the line each case adds
	for _, c := range []struct{ extra, says string }{
		{"checkpoints: {url: 'file://" + betaDir + "'}", "checkpoints.url: file://" + betaDir + " is inside this server's root"},
		{"checkpoints: {url: 'file://" + alpha + "/../beta'}", "'..'"},
		{"checkpoints: {url: 'file://" + alpha + "/link/teams/beta'}", "inside this server's root"},
		{"checkpoints: {url: 's3://ckpts/alphabet'}", "not under team alpha's storage prefixes"},
		{"sampler: {name: tpe, warm_start: ['" + betaDir + "']}", "sampler.warm_start[0]: file://" + betaDir + " is inside this server's root"},
	} {
		_, _, err := cls["alpha"].Submit(context.Background(), server.Submission{Spec: tinySpec + c.extra + "\n"})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 422 || !strings.Contains(strings.Join(ce.Problems, "\n"), c.says) || !strings.Contains(strings.Join(ce.Problems, "\n"), line) {
			t.Errorf("%s: %v %+v, want 422 saying %q", c.extra, err, ce, c.says)
		}
	}
	for _, ok := range []string{"checkpoints: {url: 'file://" + alpha + "/exp'}", "checkpoints: {url: 's3://ckpts/alpha/exp'}"} {
		if _, _, err := cls["alpha"].Submit(context.Background(), server.Submission{Spec: tinySpec + ok + "\n"}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// beta has no prefixes: only its run's own folder.
	_, _, err = cls["beta"].Submit(context.Background(), server.Submission{Spec: tinySpec + "checkpoints: {url: 'file://" + alpha + "'}\n"})
	var ce *client.Error
	if !errors.As(err, &ce) || !strings.Contains(strings.Join(ce.Problems, "\n"), "team beta has no storage prefixes") {
		t.Errorf("beta's checkpoints in alpha's prefix: %v", err)
	}
}

// gateTrainer reports as the trainer contract asks once the file $GATE exists: a run that holds
// its GPU until the test lets it go.
const gateTrainer = `#!/bin/sh
while [ ! -e "$GATE" ]; do sleep 0.05; done
i=$RB_START_ITER
while [ "$i" -lt "$RB_TARGET_ITER" ]; do i=$((i+1)); echo "@rb {\"iter\": $i, \"score\": 0.5}"; done
`

// A link planted in a team's storage prefix while its run waits in the queue (the hostile pass:
// checkpoints.url file://PREFIX/later/x admitted, then PREFIX/later made a link to the folder of
// every team's runs) is found when the run is about to start: the run is refused with the reason
// and nothing is written through the link. Before, its driver followed the link and, as the
// server's user, made the run's checkpoint folders among the teams' (or inside one of them).
func TestServerStorageLinkPlantedWhileQueued(t *testing.T) {
	t.Parallel()
	root, shared, work := t.TempDir(), t.TempDir(), t.TempDir()
	openAbove(t, work) // the gate trainer runs sandboxed, as another uid
	alpha := filepath.Join(shared, "alpha")
	os.MkdirAll(alpha, 0o755)
	srv, cls := teamServer(t, []string{"--root", root}, nil, map[string][]string{
		"alpha": {"--storage-prefix", "file://" + alpha, "--max-gpus", "1"}, "beta": nil})
	ctx, cl := context.Background(), cls["alpha"]
	script, gate := filepath.Join(work, "gate.sh"), filepath.Join(work, "open")
	if err := os.WriteFile(script, []byte(gateTrainer), 0o755); err != nil {
		t.Fatal(err)
	}
	holder := regexp.MustCompile(`(?m)^trainer: .*$`).ReplaceAllString(tinySpec, fmt.Sprintf("trainer: {command: [sh, %s], env: {GATE: %q}}", script, gate))
	first, _, err := cl.Submit(ctx, server.Submission{Spec: holder})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, cl, first.ID, "started", func(r client.Run) bool { return r.State == store.Running })
	queued, _, err := cl.Submit(ctx, server.Submission{Spec: tinySpec + "checkpoints: {url: 'file://" + alpha + "/later/x'}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if queued.State != store.Queued {
		t.Fatalf("the second run is %s beside the holder under max_gpus 1", queued.State)
	}
	teams := filepath.Join(root, "teams") // every team's runs
	if err := os.Symlink(teams, filepath.Join(alpha, "later")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	end := waitRun(t, cl, queued.ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Failed || !strings.Contains(end.Message, "refused at its start") || !strings.Contains(end.Message, "inside this server's root") {
		t.Fatalf("the run whose prefix now links into the server's root: %s %q\n%s", end.State, end.Message, srv.log)
	}
	if _, err := os.Stat(filepath.Join(teams, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("something was written through the link among the teams' folders: %v", err)
	}
}

// A user may have --max-queued-per-user runs queued: the next is refused with 429 and why.
func TestServerQueueLimit(t *testing.T) {
	t.Parallel()
	_, cls := teamServer(t, []string{"--root", t.TempDir()}, []string{"--max-queued-per-user", "1"}, map[string][]string{"ml": {"--max-gpus", "1"}})
	var refusal *client.Error
	for i := range 4 { // the first may start at once, the second queue: a third is over
		_, _, err := cls["ml"].Submit(context.Background(), server.Submission{Spec: tinySpec})
		if errors.As(err, &refusal) {
			break
		}
		if err != nil || i == 3 {
			t.Fatalf("submission %d: %v", i, err)
		}
	}
	if refusal.Status != http.StatusTooManyRequests || refusal.Refusal == nil || refusal.Refusal.Reason != "queue" ||
		!strings.Contains(refusal.Message, "ml-user has 1 runs queued, the most it may") {
		t.Fatalf("refusal %d %+v: %s", refusal.Status, refusal.Refusal, refusal.Message)
	}
}

// A quota lowered below a queued run's width: the run leaves the queue, cancelled with the
// reason (in its message and the team's audit), and the runs behind it go on (on main it stayed
// queued for ever, silently, and held them back).
func TestServerLoweredQuotaRefusesQueuedRun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	_, cls := teamServer(t, []string{"--root", root}, nil, map[string][]string{"ml": {"--max-gpus", "2"}})
	cl, ctx := cls["ml"], context.Background()
	wide := strings.Replace(tinySpec, "gpus_per_node: 1", "gpus_per_node: 2", 1)
	var runs []client.Run
	for _, spec := range []string{wide, wide, tinySpec} { // the first runs; the others wait for it
		r, _, err := cl.Submit(ctx, server.Submission{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if runs[1].GPUs != 2 || runs[2].GPUs != 1 {
		t.Fatalf("widths %d and %d, want 2 and 1", runs[1].GPUs, runs[2].GPUs)
	}
	if _, errOut, code := rb(t, "server", "teams", "set", "ml", "--max-gpus", "1", "--root", root); code != 0 {
		t.Fatal(errOut)
	}
	refused := waitRun(t, cl, runs[1].ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if refused.State != store.Cancelled || !strings.Contains(refused.Message, "refused while queued: its plan holds up to 2 GPUs on 1 nodes; team ml may now hold 1 GPUs") {
		t.Fatalf("the run wider than the lowered quota: %+v", refused)
	}
	if behind := waitRun(t, cl, runs[2].ID, "ended", func(r client.Run) bool { return r.State.Ended() }); behind.State != store.Finished {
		t.Fatalf("the run behind it: %+v", behind)
	}
	audit, err := cl.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range audit {
		found = found || (e.Action == "refuse-queued" && e.Target == runs[1].ID && e.User == "(server)")
	}
	if !found {
		t.Errorf("team ml's audit has no refuse-queued of %s: %+v", runs[1].ID, audit)
	}
}

// A budget lowered below what a queued run reserves: the run leaves the queue, cancelled with
// the reason, rather than starting on a month already spent (on main it started whatever had
// been spent).
func TestServerLoweredBudgetRefusesQueuedRun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	_, cls := teamServer(t, []string{"--root", root}, nil, map[string][]string{"ml": {"--max-gpus", "1", "--budget", "100"}})
	cl, ctx := cls["ml"], context.Background()
	var runs []client.Run
	for range 2 { // the first runs; the second waits for its GPU
		r, _, err := cl.Submit(ctx, server.Submission{Spec: tinySpec})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if _, errOut, code := rb(t, "server", "teams", "set", "ml", "--budget", "0.000001", "--root", root); code != 0 {
		t.Fatal(errOut)
	}
	refused := waitRun(t, cl, runs[1].ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if refused.State != store.Cancelled || !refused.StartedAt.IsZero() || !strings.Contains(refused.Message, "refused while queued: its predicted cost") {
		t.Fatalf("the queued run over the lowered budget: %+v", refused)
	}
}
