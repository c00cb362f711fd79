package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
)

// openAbove lets other users traverse (o+x) the folders from os.TempDir down to dir, those that
// exist: a test's temporary folders are 0700, and a sandboxing server's root, with the built CLI
// and a test's trainer, must be reachable by its trainers' uids.
func openAbove(t testing.TB, dir string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for p := filepath.Clean(dir); strings.HasPrefix(p, tmp+string(filepath.Separator)); p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			continue // made later, by the server
		}
		if err := os.Chmod(p, info.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
}

// hostileTrainer reports as the trainer contract asks and, meanwhile, dumps its environment,
// tries the server's database, the teams' folder and another team's run, and leaves a child
// that started a session of its own with an empty environment, sleeping STRAY_MARK seconds.
const hostileTrainer = `#!/bin/sh
echo "hostile: env follows"
env
echo "hostile: uid $(id -u)"
if cat "$SERVER_ROOT/server.db" >/dev/null 2>&1; then echo "hostile: READ the database"; else echo "hostile: database denied"; fi
if ls "$SERVER_ROOT/teams" >/dev/null 2>&1; then echo "hostile: LISTED the teams"; else echo "hostile: teams denied"; fi
if cat "$OTHER_RUN/spec.yaml" >/dev/null 2>&1; then echo "hostile: READ the other spec"; else echo "hostile: other spec denied"; fi
if cat "$OTHER_RUN/driver.log" >/dev/null 2>&1; then echo "hostile: READ the other log"; else echo "hostile: other log denied"; fi
if ls "$OTHER_RUN/work/b0-t0000/checkpoint" >/dev/null 2>&1; then echo "hostile: READ the other checkpoint"; else echo "hostile: other checkpoint denied"; fi
setsid env -i sleep "$STRAY_MARK" </dev/null >/dev/null 2>&1 &
echo "hostile: stray $!"
i=$RB_START_ITER
while [ "$i" -lt "$RB_TARGET_ITER" ]; do i=$((i+1)); echo "@rb {\"iter\": $i, \"score\": 0.5}"; done
echo "$i" > "$RB_CHECKPOINT_DIR/iter"
`

// H1 and the stray descendants: a team's hostile trainer on a two-team server (SQLite, local
// backend, run as root, so sandboxed) sees none of the server's environment (its AWS secret,
// its PGPASSWORD), cannot read the database, list the teams or read the other team's run, runs
// as a uid other than the server's, and nothing it started survives its run's end: the child
// that called setsid with an empty environment included.
func TestServerSandboxesHostileTrainers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sandbox needs root")
	}
	t.Parallel()
	root, work := t.TempDir(), t.TempDir()
	openAbove(t, work)
	for _, args := range [][]string{{"server", "teams", "add", "alpha", "--root", root}, {"server", "teams", "add", "beta", "--root", root}} {
		if _, errOut, code := rb(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	token := map[string]string{}
	for _, u := range [][2]string{{"ann", "alpha"}, {"ben", "beta"}} {
		out, errOut, code := rb(t, "server", "users", "add", u[0], "--team", u[1], "--root", root)
		if code != 0 {
			t.Fatalf("users add %s: %s", u[0], errOut)
		}
		token[u[0]] = strings.TrimSpace(out)
	}
	const secret, pgpass = "sentinel-aws-secret-8d2f", "sentinel-pg-password-51c7"
	srv := startServerEnv(t, binary, []string{"AWS_SECRET_ACCESS_KEY=" + secret, "PGPASSWORD=" + pgpass}, "--root", root)
	srv.waitSaid(t, "trainers run sandboxed")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server said:\n%s", srv.log)
		}
	})
	as := func(user string) []string {
		return []string{"RUBBERBAND_SERVER=" + srv.base, "RUBBERBAND_TOKEN=" + token[user]}
	}
	// Both teams' specs are the synthetic job made small; beta's trains with the synthetic
	// trainer, alpha's with the hostile one.
	synthetic, err := syntheticSource()
	if err != nil {
		t.Fatal(err)
	}
	small := strings.NewReplacer("trials: 16", "trials: 2", "samples: 200", "samples: 20").Replace(string(synthetic))
	betaSpec := filepath.Join(work, "beta.yaml")
	if err := os.WriteFile(betaSpec, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := rbEnv(t, binary, as("ben"), "run", betaSpec, "--detach")
	if code != 0 {
		t.Fatalf("ben's run: %s", errOut)
	}
	other := filepath.Join(root, "teams", "beta", strings.TrimSpace(out))
	// Beta's run ends first: its trainers' folders stay, and its uid is free again, which alpha's
	// run must not be given (a uid is never handed out twice).
	ben, _ := client.New(srv.base, token["ben"])
	if end := waitRun(t, ben, filepath.Base(other), "ended", func(r client.Run) bool { return r.State.Ended() }); end.State != store.Finished {
		t.Fatalf("ben's run ended %s: %+v", end.State, end)
	}

	script := filepath.Join(work, "hostile.sh")
	mark := strconv.Itoa(900000 + rand.IntN(99999))
	spec := regexp.MustCompile(`(?m)^trainer: .*$`).ReplaceAllString(small,
		fmt.Sprintf("trainer: {command: [sh, %s], env: {SERVER_ROOT: %q, OTHER_RUN: %q, STRAY_MARK: %q}}", script, root, other, mark))
	specPath := filepath.Join(work, "hostile.yaml")
	for path, body := range map[string]string{script: hostileTrainer, specPath: spec} {
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = rbEnv(t, binary, as("ann"), "run", specPath, "--detach")
	if code != 0 {
		t.Fatalf("ann's run: %s", errOut)
	}
	id := strings.TrimSpace(out)
	ann, _ := client.New(srv.base, token["ann"])
	end := waitRun(t, ann, id, "ended", func(r client.Run) bool { return r.State.Ended() })
	if end.State != store.Finished {
		t.Fatalf("the hostile run ended %s: %+v\n%s", end.State, end, srv.log)
	}
	logs, _ := filepath.Glob(filepath.Join(root, "teams", "alpha", id, "logs", "*.log"))
	var all strings.Builder
	for _, l := range logs {
		all.Write(readFileBytes(l))
	}
	got := all.String()
	if os.Getenv("RB_SHOW_HOSTILE") != "" {
		t.Log(got)
	}
	if !strings.Contains(got, "hostile: env follows") || !strings.Contains(got, "hostile: stray ") {
		t.Fatalf("the hostile trainer did not run:\n%s", got)
	}
	for _, leak := range []string{secret, pgpass, "AWS_SECRET_ACCESS_KEY", "RUBBERBAND_ROOT", "hostile: uid 0\n", "READ", "LISTED"} {
		if strings.Contains(got, leak) {
			t.Errorf("the trial logs hold %q:\n%s", leak, got)
		}
	}
	for _, denied := range []string{"database denied", "teams denied", "other spec denied", "other log denied", "other checkpoint denied"} {
		if !strings.Contains(got, denied) {
			t.Errorf("the trial logs do not say %q:\n%s", denied, got)
		}
	}
	var uids [2]int
	for i, dir := range []string{other, filepath.Join(root, "teams", "alpha", id)} {
		var rf struct {
			Sandbox struct{ UID int } `json:"sandbox"`
		}
		if err := json.Unmarshal(readFileBytes(filepath.Join(dir, "run.json")), &rf); err != nil || rf.Sandbox.UID == 0 {
			t.Fatalf("%s/run.json: no sandbox uid (%v)", dir, err)
		}
		uids[i] = rf.Sandbox.UID
	}
	if uids[0] == uids[1] {
		t.Errorf("alpha's run was given uid %d again, beta's ended run's: what beta's trainers left on the host acts as alpha's", uids[0])
	}
	// Every stray is gone once the run has ended: none sleeps its mark any more.
	if strays := processesWithArgs("sleep", mark); len(strays) > 0 {
		for _, pid := range strays {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("%d setsid'ed descendants with an empty environment outlived the run (PIDs %v)", len(strays), strays)
	}
}

// processesWithArgs are the live processes whose command line is exactly args.
func processesWithArgs(args ...string) []int {
	want := strings.Join(args, "\x00") + "\x00"
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(cmdline) == want {
			out = append(out, pid)
		}
	}
	return out
}

// nobody runs a command of the built CLI as the unprivileged user nobody, from the repository
// root.
func nobody(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = "../.."
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	return cmd
}

// A server that cannot sandbox (run as an unprivileged user) refuses the local backend once it
// has two teams, unless told --single-tenant; one that has a single team starts, and refuses
// submissions once a second team is added while it runs.
func TestServerRefusesUnsandboxedTeams(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the server as another user")
	}
	t.Parallel()
	root := t.TempDir()
	openAbove(t, root)
	if err := os.Chown(root, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(args ...string) (string, int) {
		t.Helper()
		out, err := nobody(ctx, append(args, "--root", root)...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := run("server", "teams", "add", "alpha"); code != 0 {
		t.Fatalf("teams add: %s", out)
	}
	out, code := run("server", "users", "add", "ann", "--team", "alpha")
	if code != 0 {
		t.Fatalf("users add: %s", out)
	}
	token := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	// One team: it starts, saying its trainers are not sandboxed; a second team added meanwhile
	// stops its submissions.
	addr := fmt.Sprintf("127.0.0.1:%d", servers.FreePort(t))
	srv := nobody(ctx, "server", "--root", root, "--addr", addr, "--time-scale", "0.02")
	pipe, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = srv.Stdout
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	said := waitLine(t, pipe, "rubberband server: http")
	if !strings.Contains(said, "cannot be sandboxed") {
		t.Errorf("the unprivileged server does not say its trainers are unsandboxed:\n%s", said)
	}
	if out, code := run("server", "teams", "add", "beta"); code != 0 {
		t.Fatalf("teams add beta: %s", out)
	}
	_, errOut, code := rbEnv(t, binary, []string{"RUBBERBAND_SERVER=http://" + addr, "RUBBERBAND_TOKEN=" + token}, "run", "cmd/rubberband/testdata/synthetic.yaml", "--detach")
	if code == 0 || !strings.Contains(errOut, "trainers cannot be sandboxed") || !strings.Contains(errOut, "--single-tenant") {
		t.Errorf("a submission to an unsandboxed server of two teams: exit %d: %s", code, errOut)
	}
	srv.Process.Kill()
	srv.Wait()
	// Two teams: refused at start, saying why and what to do.
	out, code = run("server", "--addr", "127.0.0.1:0")
	if code != 2 || !strings.Contains(out, "trainers cannot be sandboxed") || !strings.Contains(out, "--single-tenant") {
		t.Fatalf("an unprivileged server of two teams: exit %d: %s", code, out)
	}
	// --single-tenant: it starts.
	single := nobody(ctx, "server", "--root", root, "--addr", "127.0.0.1:0", "--single-tenant")
	pipe, err = single.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	single.Stderr = single.Stdout
	if err := single.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { single.Process.Kill(); single.Wait() }()
	if said := waitLine(t, pipe, "rubberband server: http"); !strings.Contains(said, "--single-tenant") {
		t.Errorf("the --single-tenant server does not say where its trainers run:\n%s", said)
	}
}

// waitLine reads r until a line holds text, and returns everything read; it fails at EOF.
func waitLine(t testing.TB, r interface{ Read([]byte) (int, error) }, text string) string {
	t.Helper()
	var all strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		all.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), text) {
			go func() {
				for sc.Scan() { // keep draining: the process must not block on its output
				}
			}()
			return all.String()
		}
	}
	t.Fatalf("never said %q:\n%s", text, all.String())
	return ""
}

// `rubberband run` (no server, unsandboxed): every trainer is in a cgroup of the run's own
// where cgroup v2 is writable, and the run's end kills it whole, the descendant that called
// setsid and cleared its environment included.
func TestRunEndsTrainersDescendants(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a cgroup of the run's own needs a writable cgroup v2 (root here)")
	}
	t.Parallel()
	work := t.TempDir()
	synthetic, err := syntheticSource()
	if err != nil {
		t.Fatal(err)
	}
	script, mark := filepath.Join(work, "hostile.sh"), strconv.Itoa(800000+rand.IntN(99999))
	small := strings.NewReplacer("trials: 16", "trials: 2", "samples: 200", "samples: 20").Replace(string(synthetic))
	spec := regexp.MustCompile(`(?m)^trainer: .*$`).ReplaceAllString(small,
		fmt.Sprintf("trainer: {command: [sh, %s], env: {STRAY_MARK: %q}}", script, mark))
	specPath := filepath.Join(work, "hostile.yaml")
	for path, body := range map[string]string{script: hostileTrainer, specPath: spec} {
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(work, "state")
	if _, errOut, code := rb(t, "run", specPath, "--state", state, "--time-scale", "0.02"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	logs, _ := filepath.Glob(filepath.Join(state, "logs", "*.log"))
	var all strings.Builder
	for _, l := range logs {
		all.Write(readFileBytes(l))
	}
	if !strings.Contains(all.String(), "hostile: stray ") {
		t.Fatalf("the trainer started no stray:\n%s", all.String())
	}
	if strays := processesWithArgs("sleep", mark); len(strays) > 0 {
		for _, pid := range strays {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("%d setsid'ed descendants with an empty environment outlived the run (PIDs %v)", len(strays), strays)
	}
}
