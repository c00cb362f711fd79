package rundir

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// List sums up every run under the root, a damaged one as a row that says why it cannot be
// read, beside the others; WriteList tables them.
func TestList(t *testing.T) {
	dir, _, _ := newRun(t)
	root := filepath.Dir(dir)
	damaged := filepath.Join(root, "damaged")
	if err := Mkdir(damaged); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(damaged, RunJSON), []byte("{not json"), FileMode); err != nil {
		t.Fatal(err)
	}
	rows := List(root)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rows), rows)
	}
	byName := map[string]Summary{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	if r := byName["damaged"]; r.Status != "unreadable" || r.Why == "" || r.Dir != damaged {
		t.Errorf("the damaged run: %+v", r)
	}
	if r, ok := byName["job"]; !ok || r.RunID != "r1" || r.Backend != "local" || r.Status == "unreadable" {
		t.Errorf("the run: %+v (rows %+v)", r, rows)
	}
	var out bytes.Buffer
	WriteList(&out, root, rows, time.Now())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(out.String(), "unreadable: ") || !strings.Contains(out.String(), "r1") {
		t.Errorf("the table:\n%s", out.String())
	}
	if got := List(filepath.Join(root, "none")); got == nil || len(got) != 0 {
		t.Errorf("no root: %#v, want no rows (not nil: JSON's [])", got)
	}
	out.Reset()
	if WriteList(&out, "elsewhere", nil, time.Now()); out.String() != "no runs under elsewhere\n" {
		t.Errorf("no rows: %q", out.String())
	}
}
