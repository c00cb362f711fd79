package e2e

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
	page, err := os.ReadFile("../docs/notebook.md")
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
	py.Dir = ".."
	py.Env = append(os.Environ(), "RUBBERBAND_SERVER="+srv.base, "RUBBERBAND_TOKEN="+cls["ml"].Token, "PYTHONPATH=python", "PYTHONDONTWRITEBYTECODE=1")
	out, err := py.CombinedOutput()
	if err != nil {
		t.Fatalf("the walk-through: %v\n%s\n%s", err, out, srv.log)
	}
	got := string(out)
	t.Logf("the walk-through printed:\n%s", got)
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
		regexp.MustCompile(`(?m)^notebook · run r\S+ · finished · state in server:teams/ml/r\S+$`), // status(), as the CLI prints it
		regexp.MustCompile(`(?m)^\S+ r\S+ finished: JCT \S+, cost \$[0-9.]+\n[^\n]*the extra run`), // logs(tail=1): the driver log's last line alone
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

// attributesScript prints, one a line, "CLASS NAME" for each attribute of the Python package's
// classes (an instance's, and the class's properties) that help(CLASS), pydoc's render, does
// not name in the class's own docstring; then "ALL NAME" for each of rubberband.trainer's
// attributes and public functions, for docs/trainers.md.
const attributesScript = `
import pydoc, re
from rubberband import trainer, client
cases = [
    (trainer.Trial, trainer.Trial(env={"RB_TARGET_ITER": "1"})),
    (client.Client, client.Client("http://rubberband.invalid", "rbt_x")),
    (client.Run, client.Run(None, {})),
    (client.ServerError, client.ServerError(400, "m")),
    (client.Refused, client.Refused(403, "m")),
]
for cls, obj in cases:
    rendered = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    own = cls.__doc__ or ""
    names = [n for n in vars(obj) if not n.startswith("_")]
    names += [n for n, v in vars(cls).items() if isinstance(v, property)]
    for n in names:
        word = re.compile(r"\b%s\b" % re.escape(n))
        if not (word.search(own) and word.search(rendered)):
            print(cls.__name__, n)
t = trainer.Trial(env={"RB_TARGET_ITER": "1"})
for n in list(vars(t)) + [n for n, v in vars(trainer.Trial).items() if not n.startswith("_")]:
    print("ALL", n)
for n in ("trials", "report", "write_atomically"):
    print("ALL", n)
`

// help(Trial) and the other classes of the Python package list every attribute (on main
// help(Trial) named none of its eight), and docs/trainers.md's section on the helpers names each
// of rubberband.trainer's attributes and functions.
func TestPythonHelpersDocumentTheirAttributes(t *testing.T) {
	t.Parallel()
	py := exec.Command("/usr/bin/python3", "-c", attributesScript)
	py.Dir = ".."
	py.Env = append(os.Environ(), "PYTHONPATH=python", "PYTHONDONTWRITEBYTECODE=1")
	out, err := py.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	page, err := os.ReadFile("../docs/trainers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(page), "## The Python helpers (`rubberband.trainer`)")
	section, _, _ = strings.Cut(section, "\n## ")
	if !found {
		t.Fatal("docs/trainers.md has no section on the Python helpers")
	}
	all := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		class, name, _ := strings.Cut(line, " ")
		if class != "ALL" {
			t.Errorf("help(%s) does not list its attribute %s", class, name)
			continue
		}
		all++
		if !strings.Contains(section, "`"+name+"`") && !strings.Contains(section, "`"+name+"(") {
			t.Errorf("docs/trainers.md's section on the Python helpers does not name %s", name)
		}
	}
	if all < 12 {
		t.Fatalf("the script found %d of rubberband.trainer's names:\n%s", all, out)
	}
}
