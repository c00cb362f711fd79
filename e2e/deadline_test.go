package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// The deadline's truth through the CLI, in virtual time: the job of examples/replan.yaml planned
// for its 60 s deadline, run against 40 s with its plan kept (a budget far off makes the driver
// forecast at each sync). The forecast miss reaches standard error and the driver log as it is
// journaled; the run's summary says DEADLINE MISSED by how much, still names the winner, and
// exits 5; `-o json`, `status` and `list` say it too. Cut back to its first missing forecast,
// the run (as if still going) shows the warning in `status` and on the dashboard's page.
func TestDeadlineMissedExits5(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text, err := os.ReadFile("../examples/replan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tight := filepath.Join(dir, "tight.yaml")
	text = bytes.Replace(text, []byte("deadline: 60s"), []byte("deadline: 40s"), 1)
	if err := os.WriteFile(tight, append(text, "budget: {max_cost_usd: 100}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	planJSON, errOut, code := rb(t, "plan", "examples/replan.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, []byte(planJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "runs")
	out, errOut, code := rb(t, "run", tight, "--plan", planFile, "--backend", "virtual", "--no-replan", "--root", root)
	if code != exitDeadlineMissed {
		t.Fatalf("run: exit %d, want %d\n%s\n%s", code, exitDeadlineMissed, out, errOut)
	}
	if strings.Count(errOut, "DEADLINE: the forecast misses the deadline 40.0s") != 1 {
		t.Errorf("the forecast miss is not said once on standard error:\n%s", errOut)
	}
	run := filepath.Join(root, "replan")
	rep := readRunReport(t, run)
	if !rep.Finished || rep.Best == nil || !rep.DeadlineMissed || rep.DeadlineS != 40 || rep.MissedByS != rep.Realized.JCT-40 {
		t.Fatalf("report: finished %v, best %+v, deadline %v s, missed %v by %v s, JCT %v s", rep.Finished, rep.Best, rep.DeadlineS, rep.DeadlineMissed, rep.MissedByS, rep.Realized.JCT)
	}
	if !strings.Contains(out, "finished: DEADLINE MISSED by ") || !strings.Contains(out, "\nDEADLINE MISSED by ") || !strings.Contains(out, "best trial "+rep.Best.Trial) {
		t.Errorf("the summary does not say the deadline was missed, or lost the winner:\n%s", out)
	}
	log, err := os.ReadFile(filepath.Join(run, rundir.DriverLog))
	if err != nil || !bytes.Contains(log, []byte("DEADLINE: the forecast misses")) || !bytes.Contains(log, []byte("DEADLINE MISSED by")) {
		t.Errorf("the driver log (%v) does not say it:\n%s", err, log)
	}
	status, _, code := rb(t, "status", run)
	if code != 0 || !strings.Contains(status, "finished: DEADLINE MISSED by") {
		t.Errorf("status: exit %d\n%s", code, status)
	}
	list, _, _ := rb(t, "list", "--root", root)
	if !strings.Contains(list, "finished: DEADLINE MISSED by") {
		t.Errorf("list:\n%s", list)
	}
	var rows []rundir.Summary
	if js, _, _ := rb(t, "list", "--root", root, "-o", "json"); json.Unmarshal([]byte(js), &rows) != nil || len(rows) != 1 || !rows[0].DeadlineMissed {
		t.Errorf("list -o json: %+v", rows)
	}
	js, _, code := rb(t, "resume", run, "-o", "json") // a finished run: its report again, and its code
	var again runstate.Report
	if code != exitDeadlineMissed || json.Unmarshal([]byte(js), &again) != nil || !again.DeadlineMissed {
		t.Errorf("resume -o json of the finished run: exit %d\n%s", code, js)
	}

	// The run as it stood at its first forecast that missed: not finished, at risk.
	cut := filepath.Join(dir, "cut")
	copyRun(t, run, cut)
	keepJournalTo(t, filepath.Join(cut, rundir.Journal), func(e journal.Event) bool {
		return e.Ev == journal.EvForecast && e.After != nil && e.After.MissProb > 0.1
	})
	status, _, _ = rb(t, "status", cut)
	if !strings.Contains(status, "DEADLINE: the forecast misses the deadline 40.0s") {
		t.Errorf("status of the run at risk:\n%s", status)
	}
	page := dashboardPage(t, dir, "cut")
	if !strings.Contains(page, `id="deadline-warning"`) || !strings.Contains(page, "the forecast misses the deadline 40.0s") {
		t.Errorf("the dashboard's page of the run at risk has no deadline warning")
	}
}

// dashboardPage serves the runs under root with `rubberband ui` and reads the page of run.
func dashboardPage(t *testing.T, root, run string) string {
	t.Helper()
	url := startUI(t, nil, "--root", root, "--addr", "127.0.0.1:0")
	base, _, _ := strings.Cut(url, "?")
	resp, err := http.Get(base + "runs/" + run)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("the dashboard's page of %s: %d\n%s", run, resp.StatusCode, page)
	}
	return string(page)
}

// finishedCode says a run's exit code is a finished run's: 0 in time, exitDeadlineMissed past its
// deadline (for tests of something else, on jobs that may finish late).
func finishedCode(code int) bool { return code == 0 || code == exitDeadlineMissed }

// ranToEnd is finishedCode for a CLI process's error: the run finished, within its deadline or
// past it. A test of a backend in real time asks this, not for exit 0: on a loaded machine (CI's
// two cores, the suite's runs side by side) a run may finish past the deadline its plan met at
// p50, and its result stands; the deadline is what `make fidelity` measures.
func ranToEnd(err error) bool {
	var exit *exec.ExitError
	return err == nil || errors.As(err, &exit) && exit.ExitCode() == exitDeadlineMissed
}

// copyRun copies a run's state directory's files (not its logs) to dst.
func copyRun(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == rundir.ReportFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// keepJournalTo cuts the journal at path after the first event last says is the last.
func keepJournalTo(t *testing.T, path string, last func(journal.Event) bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	found := false
	for sc.Scan() {
		kept.Write(sc.Bytes())
		kept.WriteByte('\n')
		var e journal.Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && last(e) {
			found = true
			break
		}
	}
	f.Close()
	if !found {
		t.Fatal("the journal holds no such event")
	}
	if err := os.WriteFile(path, kept.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}
