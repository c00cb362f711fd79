package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/syncio"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/server"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// serverProc is a `rubberband server` the test started.
type serverProc struct {
	cmd  *exec.Cmd
	base string
	log  *syncio.Buffer
	// said is broadcast at each line of the server's output (and at a waitSaid's deadline).
	said *sync.Cond
}

// waitSaid waits until the server's output holds text, or fails after 60 s.
func (p *serverProc) waitSaid(t testing.TB, text string) {
	t.Helper()
	deadline := time.AfterFunc(60*time.Second, func() { p.said.L.Lock(); p.said.Broadcast(); p.said.L.Unlock() })
	defer deadline.Stop()
	start := time.Now()
	p.said.L.Lock()
	defer p.said.L.Unlock()
	for !strings.Contains(p.log.String(), text) {
		if time.Since(start) >= 60*time.Second {
			t.Fatalf("the server never said %q:\n%s", text, p.log)
		}
		p.said.Wait()
	}
}

// startServer starts the built CLI's server on a free port with args, from the repository root
// (the synthetic trainer's spec path is relative to it), and waits until it answers.
func startServer(t testing.TB, args ...string) *serverProc {
	t.Helper()
	return startServerWith(t, binary, args...)
}

// startServerWith is startServer with the CLI at bin (the plain build, for benchmarks).
func startServerWith(t testing.TB, bin string, args ...string) *serverProc {
	t.Helper()
	return startServerEnv(t, bin, nil, args...)
}

// startServerEnv is startServerWith with env added to the server's environment. A --root among
// args is opened to other users' traversal from the test's temporary folder down, as a
// sandboxing server (root) needs (openAbove).
func startServerEnv(t testing.TB, bin string, env []string, args ...string) *serverProc {
	t.Helper()
	for i, a := range args {
		if a == "--root" && i+1 < len(args) {
			openAbove(t, args[i+1])
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", servers.FreePort(t))
	p := &serverProc{base: "http://" + addr, log: &syncio.Buffer{}}
	p.cmd = exec.Command(bin, append([]string{"server", "--addr", addr, "--lease", "2s", "--time-scale", "0.02"}, args...)...)
	p.cmd.Dir = ".."
	p.cmd.Env = append(os.Environ(), env...)
	// It says where it serves once it listens: the test reads its output for that line.
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	p.said = sync.NewCond(&sync.Mutex{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.said.L.Lock()
			fmt.Fprintln(p.log, sc.Text())
			p.said.Broadcast()
			p.said.L.Unlock()
		}
	}()
	p.waitSaid(t, "rubberband server: http") // it listens
	return p
}

// kill kills the server at once, as a crash would: its drivers die with it.
func (p *serverProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// waitRun follows the run's events until check says yes of the run (checked at each event and
// at the stream's end, when the run has ended), or fails after 90 s.
func waitRun(t testing.TB, cl *client.Client, id, what string, check func(client.Run) bool) client.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var got client.Run
	var err error
	met := func() bool {
		if got, err = cl.Run(ctx, id); err == nil && check(got) {
			return true
		}
		return false
	}
	if met() {
		return got
	}
	serr := cl.Events(ctx, id, func(journal.Event) bool { return !met() })
	if met() {
		return got
	}
	t.Fatalf("run %s never %s: %+v (%v, events: %v)", id, what, got, err, serr)
	return got
}

// waitEvent follows the run's events until one of kind ev, or fails after 90 s.
func waitEvent(t testing.TB, cl *client.Client, id string, ev journal.Kind) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seen := false
	err := cl.Events(ctx, id, func(e journal.Event) bool { seen = e.Ev == ev; return !seen })
	if !seen { // the run's state, its message and its log say why
		run, rerr := cl.Run(context.Background(), id)
		var log bytes.Buffer
		cl.Logs(context.Background(), id, "", 40, false, &log)
		t.Fatalf("run %s never journaled %q: %v; the run: %+v (%v); its log's end:\n%s", id, ev, err, run, rerr, log.String())
	}
}

// cleanWinner is the winner of the synthetic job run alone, at the server's time scale.
func cleanWinner(t testing.TB) string {
	t.Helper()
	state := filepath.Join(t.TempDir(), "clean")
	if _, errOut, code := rb(t, "run", "e2e/testdata/synthetic.yaml", "--state", state, "--time-scale", "0.02"); !finishedCode(code) {
		t.Fatalf("clean run: %s", errOut)
	}
	return readRunReport(t, state).Best.Trial
}

// The whole story of a team server, SQLite: two teams, three users; a submission refused over its
// team's budget with both figures; a second run queued for its team's GPUs, with a predicted
// start, and started once the first ends; a cross-team cancel refused; the server killed
// mid-run and started again, and the run finishing with the clean run's winner; the Python client
// reading the runs, waiting for one and its best configuration.
func TestServerStory(t *testing.T) {
	t.Parallel()
	winner := cleanWinner(t)
	root := t.TempDir()
	for _, args := range [][]string{
		{"server", "teams", "add", "ml", "--max-gpus", "4", "--budget", "100", "--root", root},
		{"server", "teams", "add", "cv", "--budget", "0.01", "--root", root},
	} {
		if _, errOut, code := rb(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	token := map[string]string{}
	for _, u := range [][2]string{{"alice", "ml"}, {"bob", "ml"}, {"carol", "cv"}} {
		out, errOut, code := rb(t, "server", "users", "add", u[0], "--team", u[1], "--root", root)
		if code != 0 || !strings.HasPrefix(out, "rbt_") {
			t.Fatalf("users add %s: exit %d: %s%s", u[0], code, out, errOut)
		}
		token[u[0]] = strings.TrimSpace(out)
	}
	if _, errOut, code := rb(t, "server", "users", "add", "dave", "--team", "nobody", "--root", root); code != 2 || !strings.Contains(errOut, "not found") {
		t.Errorf("a user of no team: exit %d: %s", code, errOut)
	}
	srv := startServer(t, "--root", root, "--time-scale", "0.05") // a run of about 5 s: time to kill the server in it
	as := func(user string) []string {
		return []string{"RUBBERBAND_SERVER=" + srv.base, "RUBBERBAND_TOKEN=" + token[user]}
	}
	spec := "e2e/testdata/synthetic.yaml"

	// carol's team has a cent left this month: refused, with the plan's cost and what remains.
	_, errOut, code := rbEnv(t, binary, as("carol"), "run", spec, "--detach")
	if code != 2 || !strings.Contains(errOut, "over team cv's remaining budget this month, $0.0100") || !strings.Contains(errOut, "predicted cost $") {
		t.Fatalf("carol's submission: exit %d: %s", code, errOut)
	}
	// alice's run starts; bob's waits for the team's 4 GPUs, which hers holds.
	out, errOut, code := rbEnv(t, binary, as("alice"), "run", spec, "--detach")
	if code != 0 {
		t.Fatalf("alice: exit %d: %s", code, errOut)
	}
	first := strings.TrimSpace(out)
	out, errOut, code = rbEnv(t, binary, as("bob"), "run", spec, "--detach", "-o", "json")
	if code != 0 || !strings.Contains(out, `"state": "queued"`) {
		t.Fatalf("bob: exit %d: %s%s", code, out, errOut)
	}
	alice, _ := client.New(srv.base, token["alice"])
	waitRun(t, alice, first, "started", func(r client.Run) bool { return r.State == store.Running })
	// The server predicts a queued run's start at its next queue pass, which may follow alice's
	// start: her run's events pace the look (no wall-clock wait).
	waitRun(t, alice, first, "bob's run given a predicted start", func(client.Run) bool {
		runs, err := alice.Runs(context.Background())
		return err == nil && len(runs) == 2 && !runs[1].PredictedStart.IsZero()
	})
	runs, err := alice.Runs(context.Background())
	if err != nil || len(runs) != 2 {
		t.Fatalf("alice sees %d runs: %v", len(runs), err)
	}
	second := runs[1].ID
	if runs[1].State != store.Queued || runs[1].PredictedStart.IsZero() {
		t.Errorf("bob's run: %s, predicted start %v", runs[1].State, runs[1].PredictedStart)
	}
	if out, _, _ := rbEnv(t, binary, as("bob"), "list"); !strings.Contains(out, "queued") || !strings.Contains(out, " in ") {
		t.Errorf("list shows no queued run with its predicted start:\n%s", out)
	}
	// carol may not cancel team ml's run, nor see it.
	if _, errOut, code := rbEnv(t, binary, as("carol"), "cancel", first); code != 2 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("carol cancelling alice's run: exit %d: %s", code, errOut)
	}
	if out, _, _ := rbEnv(t, binary, as("carol"), "list"); strings.Contains(out, first) {
		t.Errorf("carol sees team ml's runs:\n%s", out)
	}
	// The server dies once the first stage has synced, and comes back.
	waitEvent(t, alice, first, journal.EvSync)
	if run, err := alice.Run(context.Background(), first); err != nil || run.State != store.Running {
		t.Fatalf("alice's run ended before the server could be killed in it: %+v %v", run, err)
	}
	srv.kill()
	srv2 := startServer(t, "--root", root, "--time-scale", "0.05")
	alice.Base = srv2.base
	end := waitRun(t, alice, first, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Finished || end.CostUSD <= 0 {
		t.Fatalf("the killed server's run: %+v\n%s", end, srv2.log)
	}
	var best struct{ Trial string }
	if err := alice.Get(context.Background(), first, "best", &best); err != nil || best.Trial != winner {
		t.Fatalf("after the crash the winner is %q (%v); the clean run's is %s", best.Trial, err, winner)
	}
	// A second driver took the run over from its journal: events were in it.
	if log := string(readFileBytes(filepath.Join(root, "teams", "ml", first, "driver.log"))); !regexp.MustCompile(`took the run: local backend, ([1-9][0-9]* events in the journal|from its snapshot and [0-9]+ events after it in the journal)`).MatchString(log) {
		t.Fatalf("the run was not resumed from its journal by the second server:\n%s", log)
	}
	// bob's run starts once alice's has ended; logs -f follows its driver log until it ends.
	out, errOut, code = rbEnv(t, binary, []string{"RUBBERBAND_SERVER=" + srv2.base, "RUBBERBAND_TOKEN=" + token["bob"]}, "logs", "-f", second)
	if code != 0 || !strings.Contains(out, "finished: JCT") {
		t.Fatalf("logs -f of bob's run: exit %d: %s\n%s", code, errOut, out)
	}
	// The Python client reads it.
	py := exec.Command("python3", "-c", `
import os, sys
from rubberband import Client
c = Client()
runs = c.runs()
assert len(runs) == 2, runs
r = c.run(sys.argv[1]).wait(timeout=120)
assert r.state == "finished", r.fields
trials = r.trials()
assert len(trials) == 16, len(trials)
print(r.best()["trial"], r.cost_usd > 0)
`, second)
	py.Dir = ".."
	py.Env = append(os.Environ(), "RUBBERBAND_SERVER="+srv2.base, "RUBBERBAND_TOKEN="+token["bob"], "PYTHONPATH=python")
	pyOut, err := py.CombinedOutput()
	if err != nil || strings.TrimSpace(string(pyOut)) != winner+" True" {
		t.Fatalf("python client: %v\n%s\n%s", err, pyOut, srv2.log)
	}
	// Team cv's audit log holds carol's refused submission and refused cancel, with who and when,
	// and the admin commands that made the team and carol.
	carol, _ := client.New(srv2.base, token["carol"])
	audit, err := carol.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]bool{}
	for _, e := range audit {
		if (e.User != "carol" && !strings.HasPrefix(e.User, "cli:")) || e.At.IsZero() {
			t.Errorf("team cv's audit holds %+v", e)
		}
		actions[e.Action] = true
	}
	if !actions["refuse"] || !actions["cancel-refused"] || !actions["team-create"] || !actions["user-create"] {
		t.Errorf("team cv's audit: %+v", audit)
	}
}

func readFileBytes(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// Two servers on one PostgreSQL database, each with a root of its own and the runs mirrored to
// the database (--mirror db): the first drives (it holds the lease), the second stands by and
// answers the API from the mirror; the first is killed mid-run (SIGKILL: its driver dies with
// it) and the second takes the lease over, restores the run's folder and finishes the run with
// the clean run's winner.
func TestServerStandbyTakesOverOnPostgres(t *testing.T) {
	t.Parallel()
	winner := cleanWinner(t)
	pg := servers.StartPostgres(t)
	checkpoints := t.TempDir() // a shared disk's
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--db", pg.URL, "--storage-prefix", "file://"+checkpoints); code != 0 {
		t.Fatalf("teams add: %s", errOut)
	}
	out, errOut, code := rb(t, "server", "users", "add", "alice", "--team", "ml", "--db", pg.URL)
	if code != 0 {
		t.Fatalf("users add: %s", errOut)
	}
	token := strings.TrimSpace(out)
	// At five times startServer's time scale (the synthetic trainer's winner does not depend on
	// it): the run goes on for seconds after its first sync, so the kill there comes before the
	// first server could finish it, on a loaded machine too.
	const slower = "0.1"
	first := startServer(t, "--root", t.TempDir(), "--db", pg.URL, "--mirror", "db", "--time-scale", slower)
	driving := func(p *serverProc) bool {
		resp, err := http.Get(p.base + "/api/v1/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Driving bool }
		json.NewDecoder(resp.Body).Decode(&h)
		return h.Driving
	}
	first.waitSaid(t, "holds the lease")
	standbyRoot := t.TempDir()
	standby := startServer(t, "--root", standbyRoot, "--db", pg.URL, "--mirror", "db", "--time-scale", slower)
	if driving(standby) {
		t.Fatal("both servers drive")
	}
	cl, _ := client.New(standby.base, token) // either server answers the API
	sub := submissionOf(t, "e2e/testdata/synthetic.yaml")
	if _, _, err := cl.Submit(context.Background(), sub); err == nil || !strings.Contains(err.Error(), "checkpoints.url") {
		t.Fatalf("a mirrored server took a spec whose checkpoints stay in the run's folder: %v", err)
	}
	sub.Spec += "checkpoints: {url: 'file://" + checkpoints + "'}\n"
	run, _, err := cl.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, cl, run.ID, journal.EvSync)
	first.kill()
	end := waitRun(t, cl, run.ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Finished || !driving(standby) {
		t.Fatalf("after the first server died: %+v, the stand-by drives: %v\n%s", end, driving(standby), standby.log)
	}
	standby.waitSaid(t, "holds the lease") // it says it took over
	journalPath := filepath.Join(standbyRoot, "teams", "ml", run.ID, "journal.jsonl")
	if !bytes.Contains(readFileBytes(journalPath), []byte(`"ev":"`+journal.EvResume+`"`)) {
		t.Errorf("the stand-by's copy of the journal has no resume: the first server finished the run")
	}
	launchedOnce(t, journalPath)
	var best struct{ Trial string }
	if err := cl.Get(context.Background(), run.ID, "best", &best); err != nil || best.Trial != winner {
		t.Fatalf("winner %q (%v); the clean run's is %s", best.Trial, err, winner)
	}
}

// submissionOf is a spec file as a submission.
func submissionOf(t testing.TB, path string) server.Submission {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	// Sent without its folder's code, its trainer runs in the server's folder: the synthetic
	// trainer's spec (named relative to the spec's own folder) is named absolutely.
	abs, err := filepath.Abs(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "--spec, "+filepath.Base(path)+"]", "--spec, "+abs+"]")
	return server.Submission{Name: filepath.Base(path), Spec: text}
}

// A team whose month is spent while its run goes (its budget lowered by an admin) has the run
// cancelled, its nodes released, with the reason in the run's message.
func TestServerCancelsARunPastItsTeamsBudget(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if _, errOut, code := rb(t, "server", "teams", "add", "ml", "--budget", "100", "--root", root); code != 0 {
		t.Fatal(errOut)
	}
	out, errOut, code := rb(t, "server", "users", "add", "alice", "--team", "ml", "--root", root)
	if code != 0 {
		t.Fatal(errOut)
	}
	srv := startServer(t, "--root", root, "--time-scale", "0.05", "--lease", "1s")
	cl, _ := client.New(srv.base, strings.TrimSpace(out))
	run, _, err := cl.Submit(context.Background(), submissionOf(t, "e2e/testdata/synthetic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, cl, run.ID, "charged", func(r client.Run) bool { return r.State == store.Running && r.CostUSD > 0 })
	if _, errOut, code := rb(t, "server", "teams", "set", "ml", "--budget", "0.01", "--root", root); code != 0 {
		t.Fatal(errOut)
	}
	end := waitRun(t, cl, run.ID, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Cancelled || !strings.Contains(end.Message, "monthly budget of $0.0100 is spent") {
		t.Fatalf("the run past its team's budget: %+v\n%s", end, srv.log)
	}
	if log := string(readFileBytes(filepath.Join(root, "teams", "ml", run.ID, "driver.log"))); !strings.Contains(log, "cancel") {
		t.Errorf("the driver did not cancel the run:\n%s", log)
	}
}
