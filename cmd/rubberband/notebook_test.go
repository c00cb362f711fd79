package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pythonBlocks are the ```python code blocks of a Markdown page, in order.
var pythonBlocks = regexp.MustCompile("(?ms)^```python\n(.*?)^```$")

// docs/notebook.md's code blocks, run in order as one script with Debian's python3 against a
// real server, from the repository's root as the page says: submit, follow with progress,
// trials as a table, best, cancel. The page is the test: they cannot drift apart. On main the
// client had no follow, and trials() left the parameters nested in one column.
func TestNotebookWalkThrough(t *testing.T) {
	t.Parallel()
	const python = "/usr/bin/python3" // Debian's: what a user of the machine has
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("Debian's python3 is needed: %v", err)
	}
	page, err := os.ReadFile("../../docs/notebook.md")
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	for _, m := range pythonBlocks.FindAllSubmatch(page, -1) {
		script.Write(m[1])
		script.WriteString("\n")
	}
	if !strings.Contains(script.String(), ".follow(") || !strings.Contains(script.String(), ".cancel(") {
		t.Fatalf("docs/notebook.md's code blocks do not walk through follow and cancel:\n%s", script.String())
	}
	path := filepath.Join(t.TempDir(), "notebook.py")
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, cls := teamServer(t, []string{"--root", t.TempDir()}, nil, map[string][]string{"ml": nil})
	py := exec.Command(python, path)
	py.Dir = "../.."
	py.Env = append(os.Environ(), "RUBBERBAND_SERVER="+srv.base, "RUBBERBAND_TOKEN="+cls["ml"].Token, "PYTHONPATH=python", "PYTHONDONTWRITEBYTECODE=1")
	out, err := py.CombinedOutput()
	if err != nil {
		t.Fatalf("the walk-through: %v\n%s\n%s", err, out, srv.log)
	}
	got := string(out)
	// Progress came as the run went: a line per trial done, each stage's end, and the end.
	if n := strings.Count(got, " trial done "); n < 8 {
		t.Errorf("%d progress lines of trials done, want one for each of 8 trials and more for the survivors:\n%s", n, got)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^submitted r\S+ queued predicted cost \$[0-9.]+$`),
		regexp.MustCompile(`(?m)^ +[0-9.]+s +bracket 0 stage 1 +stage done +8/8 of the stage's trials done, 0 failed$`),
		regexp.MustCompile(`(?m)^ +[0-9.]+s +bracket 0 stage 2 +trial done +4/4 of the stage's trials done, 0 failed  \(b0-t\d+: [0-9.]+\)$`),
		regexp.MustCompile(`(?m)^ +[0-9.]+s +bracket 0 stage 3 +finished `),
		regexp.MustCompile(`(?m)^run r\S+ notebook: finished; cost \$[0-9.]+ \(predicted \$[0-9.]+\)$`),
		regexp.MustCompile(`(?m)^state: finished$`),
		regexp.MustCompile(`(?m)^b0-t\d+ [0-9.e-]+ \d+ [0-9.]+$`), // a trial's ID, lr, width and metric: its parameters are columns
		regexp.MustCompile(`(?m)^8 trials$`),
		regexp.MustCompile(`(?m)^best trial b0-t\d+ val_accuracy [0-9.]+ with \{`),
		regexp.MustCompile(`(?m)^the extra run: cancelled`),
	} {
		if !want.MatchString(got) {
			t.Errorf("the walk-through's output has no match for %s:\n%s", want, got)
		}
	}
	if t.Failed() {
		for _, m := range regexp.MustCompile(`see (\S+driver.log)`).FindAllStringSubmatch(got, -1) {
			t.Logf("%s:\n%s", m[1], readFileBytes(m[1]))
		}
		t.Logf("server:\n%s", srv.log)
	}
}
