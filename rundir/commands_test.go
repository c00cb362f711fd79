package rundir

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A finished run's end is written as run prints it (what report prints: the same as a server's
// run prints), its status is drawn with no driver holding it, its best is its result's, and its
// report is written with its pictures in a folder made for them.
func TestStatusBestReportNow(t *testing.T) {
	st, res, table := finishedRun(t, quickstart(t, 1), nil)
	var end, report bytes.Buffer
	if err := Report(st, &report, false, ""); err != nil {
		t.Fatal(err)
	}
	if rep, err := WriteEnd(&end, st, res, false); err != nil || rep.DeadlineMissed || end.String() != report.String() || !strings.HasPrefix(end.String(), table) {
		t.Errorf("end: missed %v, %v\n%s\nwant what report prints:\n%s", rep.DeadlineMissed, err, end.String(), report.String())
	}
	end.Reset()
	if rep, err := WriteEnd(&end, st, res, true); err != nil || !json.Valid(end.Bytes()) || !strings.Contains(end.String(), "\n  \"") || rep.Realized.JCT != res.Realized.JCT {
		t.Errorf("end as JSON: %v\n%s", err, end.String())
	}
	out, live, err := StatusNow(st, StatusOptions{JSON: true})
	if err != nil || live || !json.Valid(out) {
		t.Errorf("status: live %v, %v\n%s", live, err, out)
	}
	best, err := BestNow(st)
	if err != nil || best.Trial != res.Best.Trial {
		t.Errorf("best: %+v, %v; want %s", best, err, res.Best.Trial)
	}
	var rep bytes.Buffer
	plots := filepath.Join(t.TempDir(), "a", "plots")
	if err := Report(st, &rep, true, plots); err != nil || !json.Valid(rep.Bytes()) {
		t.Fatalf("report: %v\n%s", err, rep.String())
	}
	if fi, err := os.Stat(filepath.Join(plots, "curves.png")); err != nil || fi.Size() == 0 {
		t.Errorf("curves.png: %v", err)
	}
}
