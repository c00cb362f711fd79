package rundir

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A finished run's status is drawn with no driver holding it, its best is its result's, and its
// report is written with its pictures in a folder made for them.
func TestStatusBestReportNow(t *testing.T) {
	st, res, _ := finishedRun(t, quickstart(t, 1), nil)
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
