package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/rundir"
)

// The CLI's conventions: a stamped version, help for the app and each command, exit 2 for
// anything unknown, help texts that say where defaults come from.
func TestVersionHelpAndUsageErrors(t *testing.T) {
	t.Parallel()
	stamped := filepath.Join(t.TempDir(), "rubberband")
	// -race, as the test's own CLI: its packages are built already, so only the link is new.
	if out, err := exec.Command("go", "build", "-race", "-ldflags", "-X main.buildVersion=v9.8.7-test", "-o", stamped, "../cmd/rubberband").CombinedOutput(); err != nil {
		t.Fatal(string(out))
	}
	if out, _, code := rbWith(t, stamped, "--version"); code != 0 || strings.TrimSpace(out) != "rubberband version v9.8.7-test" {
		t.Fatalf("--version: exit %d: %q", code, out)
	}
	if out, _, code := rb(t, "--version"); code != 0 || !strings.Contains(out, "rubberband version dev") {
		t.Fatalf("unstamped --version: exit %d: %q", code, out)
	}
	out, _, code := rb(t, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, cmd := range []string{"validate", "plan", "run", "resume", "list", "status", "logs", "cancel", "completion"} {
		if !strings.Contains(out, "\n   "+cmd) {
			t.Errorf("help does not list %s:\n%s", cmd, out)
		}
	}
	if strings.Contains(out, "   worker") {
		t.Errorf("help lists the internal worker command")
	}
	out, _, code = rb(t, "help", "run")
	if code != 0 || !strings.Contains(out, "rubberband run [command options] SPEC") || !strings.Contains(out, "nomad") {
		t.Fatalf("help run: exit %d:\n%s", code, out)
	}
	for _, flag := range []string{"--quantile", "--samples", "--seed", "--deadline", "--planner"} {
		line := lineWith(out, flag+" value")
		if !strings.Contains(line, "(default: from the spec)") {
			t.Errorf("run --help: %s says %q", flag, line)
		}
	}
	if !strings.Contains(lineWith(out, "--backend"), "$RUBBERBAND_BACKEND") || !strings.Contains(lineWith(out, "--root"), "$RUBBERBAND_ROOT") {
		t.Errorf("run --help does not name the environment variables:\n%s", out)
	}
	for _, args := range [][]string{
		{"bogus"}, {"help", "bogus"}, {"plan", "--bogus", table2}, {"run", table2, "--no-such-flag"}, {"list", "--x"}, {"status", "-q", "r"},
		{"--bogus"}, {"completion", "tcsh"},
	} {
		if _, errOut, code := rb(t, args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d (want 2): %q", args, code, errOut)
		}
	}
}

func lineWith(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// Completion scripts complete commands and flags in a real shell, from the binary itself.
func TestCompletion(t *testing.T) {
	t.Parallel()
	out, _, code := rb(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit %d", code)
	}
	script := filepath.Join(t.TempDir(), "rb.bash")
	os.WriteFile(script, []byte(out), 0o644)
	complete := func(words ...string) []string {
		t.Helper()
		line := `source ` + script + `; COMP_WORDS=(` + strings.Join(words, " ") + `); COMP_CWORD=` + strconv.Itoa(len(words)-1) + `; _rubberband; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "-c", line)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v: %s", err, b)
		}
		return strings.Fields(string(b))
	}
	if got := complete("rubberband", "re"); strings.Join(got, " ") != "resume report" {
		t.Errorf("rubberband re<TAB> = %v, want resume report", got)
	}
	if got := complete("rubberband", "run", "--bac"); strings.Join(got, " ") != "--backend" {
		t.Errorf("rubberband run --bac<TAB> = %v", got)
	}
	if out, _, code := rb(t, "completion", "fish"); code != 0 || !strings.Contains(out, "complete -c rubberband") || !strings.Contains(out, "status") {
		t.Errorf("completion fish: exit %d: %.200s", code, out)
	}
	if out, _, code := rb(t, "completion", "zsh"); code != 0 || !strings.Contains(out, "compdef _rubberband rubberband") {
		t.Errorf("completion zsh: exit %d: %.200s", code, out)
	}
}

// list, status, logs: runs found by name, ID or directory under --root / RUBBERBAND_ROOT, in each
// state they can end in.
func TestListStatusLogs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root}
	const synthetic = "e2e/testdata/synthetic.yaml"
	if _, errOut, code := rbEnv(t, binary, env, "run", synthetic, "--time-scale", "0.02"); !finishedCode(code) {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	// The same spec again: a new run beside the first, not a refusal.
	if _, errOut, code := rbEnv(t, binary, env, "run", synthetic, "--time-scale", "0.02"); !finishedCode(code) {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	// A run whose every trial fails, and one whose driver is killed.
	tmp := t.TempDir()
	failing := trialSpec(t, tmp, func(s string) string {
		s = strings.Replace(s, "name: e2e-synthetic", "name: fails", 1)
		return strings.Replace(s, "trainer: {command: [rubberband, trainer, synthetic", "trainer: {command: [sh, -c, 'exit 3', synthetic", 1)
	})
	if _, _, code := rbEnv(t, binary, env, "run", failing, "--time-scale", "0.02"); code != 1 {
		t.Fatalf("failing run: exit %d", code)
	}
	killed := trialSpec(t, t.TempDir(), func(s string) string { return strings.Replace(s, "name: e2e-synthetic", "name: killed", 1) })
	cmd := startRun(t, env, "run", killed, "--time-scale", "0.05")
	waitFor(t, filepath.Join(root, "killed"), "a trial done", func(j string) bool { return strings.Contains(j, `"ev":"done"`) })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	out, errOut, code := rbEnv(t, binary, env, "list", "-o", "json")
	var runs []rundir.Summary
	if code != 0 || json.Unmarshal([]byte(out), &runs) != nil {
		t.Fatalf("list: exit %d: %s %s", code, out, errOut)
	}
	byName := map[string]rundir.Summary{}
	for _, r := range runs {
		byName[r.Name] = r
	}
	first, second := byName["e2e-synthetic"], byName["e2e-synthetic-2"]
	if len(runs) != 4 || first.Status != "finished" || second.Status != "finished" || first.RunID == second.RunID {
		t.Fatalf("list: %+v", runs)
	}
	if first.Best == nil || first.Stages != 4 || first.Of != 4 || first.CostUSD <= 0 || first.ElapsedS <= 0 || first.Backend != "local" {
		t.Fatalf("finished run listed as %+v", first)
	}
	if f := byName["fails"]; f.Status != "failed" || !strings.Contains(f.Why, "all failed the same way") || f.Best != nil {
		t.Fatalf("failed run listed as %+v", f)
	}
	if k := byName["killed"]; k.Status != "interrupted" || k.Stages != 0 || k.Best == nil {
		t.Fatalf("killed run listed as %+v", k)
	}
	// The shell completes a RUN with the runs' names.
	script, _, _ := rb(t, "completion", "bash")
	line := script + `
COMP_WORDS=(rubberband status e2e); COMP_CWORD=2; _rubberband; printf '%s\n' "${COMPREPLY[@]}"`
	sh := exec.Command("bash", "-c", line)
	sh.Env = append(os.Environ(), append(env, "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))...)
	if b, err := sh.CombinedOutput(); err != nil || strings.Join(strings.Fields(string(b)), " ") != "e2e-synthetic e2e-synthetic-2" {
		t.Errorf("rubberband status e2e<TAB> = %q (%v)", b, err)
	}
	table, _, _ := rbEnv(t, binary, env, "list")
	if !strings.Contains(table, "STATUS") || !strings.Contains(table, "failed: ") || strings.Count(table, "\n") != 5 {
		t.Fatalf("list table:\n%s", table)
	}
	// A run by its name, its ID, the start of its ID, or its directory: the same status.
	var st rundir.StatusJSON
	for _, ref := range []string{"e2e-synthetic", first.RunID, first.RunID[:len(first.RunID)-4], first.Dir} {
		out, errOut, code := rbEnv(t, binary, env, "status", ref, "-o", "json")
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.RunID != first.RunID || st.Status != "finished" || st.Best == nil {
			t.Fatalf("status %s: exit %d: %s %s", ref, code, out, errOut)
		}
	}
	if _, errOut, code := rbEnv(t, binary, env, "status", "r2026"); code != 2 || !strings.Contains(errOut, "several runs") {
		t.Fatalf("an ambiguous ID: exit %d: %s", code, errOut)
	}
	if _, errOut, code := rbEnv(t, binary, env, "status", "nope"); code != 2 || !strings.Contains(errOut, "rubberband list") {
		t.Fatalf("an unknown run: exit %d: %s", code, errOut)
	}
	out, _, code = rbEnv(t, binary, env, "status", "e2e-synthetic", "--trials")
	if code != 0 || strings.Count(out, "\n  b0-t00") != 16 || !strings.Contains(out, "local-0") || !strings.Contains(out, "SCORE") {
		t.Fatalf("status --trials:\n%s", out)
	}
	// Logs: the driver's, stamped with the run ID; a trial's, whole or its tail.
	out, _, code = rbEnv(t, binary, env, "logs", "e2e-synthetic")
	if code != 0 || !strings.Contains(out, first.RunID+" finished: JCT") || !strings.Contains(out, first.RunID+" driver PID") {
		t.Fatalf("logs RUN:\n%s", out)
	}
	out, _, code = rbEnv(t, binary, env, "logs", "e2e-synthetic", first.BestTrial)
	if code != 0 || strings.Count(out, "@rb ") < 9 {
		t.Fatalf("logs RUN TRIAL: exit %d:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	tail, _, _ := rbEnv(t, binary, env, "logs", "e2e-synthetic", first.BestTrial, "-n", "2")
	if tail != strings.Join(lines[len(lines)-2:], "\n")+"\n" {
		t.Fatalf("logs -n 2 = %q, want the last two of %q", tail, lines)
	}
	if _, errOut, code := rbEnv(t, binary, env, "logs", "e2e-synthetic", "b9-t9999"); code != 2 || !strings.Contains(errOut, "b0-t0000") {
		t.Fatalf("an unknown trial: exit %d: %s", code, errOut)
	}
	if _, errOut, code := rbEnv(t, binary, append(env, "RUBBERBAND_BACKEND=mainframe"), "run", synthetic); code != 2 || !strings.Contains(errOut, `"mainframe" is not a backend`) {
		t.Fatalf("RUBBERBAND_BACKEND=mainframe: exit %d: %s", code, errOut)
	}
}

// status -w and logs -f follow a live run and return when its driver stops.
func TestFollowARun(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := []string{"RUBBERBAND_ROOT=" + root}
	run := startRun(t, env, "run", "e2e/testdata/synthetic.yaml", "--time-scale", "0.03")
	dir := filepath.Join(root, "e2e-synthetic")
	waitFor(t, dir, "the run to start", func(j string) bool { return strings.Contains(j, `"ev":"start"`) })
	logs := exec.Command(binary, "logs", "e2e-synthetic", "-f")
	watch := exec.Command(binary, "status", "e2e-synthetic", "-w", "--interval", "100ms", "-o", "json")
	var logsOut, watchOut strings.Builder
	for _, c := range []*exec.Cmd{logs, watch} {
		c.Dir, c.Env = "..", append(os.Environ(), env...)
		c.Stderr = os.Stderr
	}
	logs.Stdout, watch.Stdout = &logsOut, &watchOut
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); !ranToEnd(err) {
		t.Fatalf("run: %v", err)
	}
	for name, c := range map[string]*exec.Cmd{"logs -f": logs, "status -w": watch} {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(20 * time.Second):
			c.Process.Kill()
			t.Fatalf("%s did not return after the run ended", name)
		}
	}
	if !strings.Contains(logsOut.String(), "finished: JCT") || !strings.Contains(logsOut.String(), "stage 4/4") {
		t.Fatalf("logs -f missed the end:\n%s", logsOut.String())
	}
	var states []rundir.StatusJSON
	for _, line := range strings.Split(strings.TrimSpace(watchOut.String()), "\n") {
		var s rundir.StatusJSON
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("status -w -o json line %q: %v", line, err)
		}
		states = append(states, s)
	}
	if len(states) < 3 || !states[0].Live || states[len(states)-1].Status != "finished" || states[len(states)-1].Live {
		t.Fatalf("status -w saw %d states, first live %v, last %+v", len(states), len(states) > 0 && states[0].Live, states[len(states)-1])
	}
}

// logs prints what a trainer printed without the terminal escape sequences in it (a window
// title, colours) and says how many it removed; --raw prints the bytes as they are. It printed
// them raw: a trainer's output could retitle the terminal or rewrite what was on it.
func TestLogsStripsTerminalEscapes(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	spec := trialSpec(t, tmp, func(s string) string {
		return strings.Replace(s, "trainer: {command: [rubberband, trainer, synthetic",
			`trainer: {command: [sh, -c, 'printf "\033]0;owned\007\033[31mred\033[0m text\n"; exit 3', synthetic`, 1)
	})
	state := filepath.Join(tmp, "state")
	if _, errOut, code := rb(t, "run", spec, "--state", state, "--time-scale", "0.02"); code != 1 {
		t.Fatalf("run: exit %d (want 1: every trial fails): %s", code, errOut)
	}
	out, errOut, code := rb(t, "logs", state, "b0-t0000")
	if code != 0 || !strings.Contains(out, "red text\n") || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(errOut, "removed") {
		t.Fatalf("logs: exit %d: %q\n%s", code, out, errOut)
	}
	raw, _, code := rb(t, "logs", state, "b0-t0000", "--raw")
	if code != 0 || !strings.Contains(raw, "\x1b]0;owned\x07\x1b[31mred\x1b[0m text\n") {
		t.Fatalf("logs --raw: exit %d: %q", code, raw)
	}
}
