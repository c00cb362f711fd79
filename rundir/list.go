package rundir

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/format"
)

// List sums up every run under root, oldest first: what `rubberband list` shows. A run that
// cannot be read is a row saying so (status "unreadable" and why), so that one damaged run
// does not hide the others.
func List(root string) []Summary {
	rows := []Summary{}
	for _, dir := range Dirs(root) {
		st, err := Open(dir)
		var s Summary
		if err == nil {
			s, err = summaryOf(st)
		}
		if err != nil {
			rows = append(rows, Summary{Name: filepath.Base(dir), Dir: dir, Status: "unreadable", Why: err.Error()})
			continue
		}
		rows = append(rows, s)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Started.Before(rows[j].Started) })
	return rows
}

// WriteList writes rows of the runs under root as `rubberband list`'s table, each run's start as
// long before now, in one write (a line that says there are none, when there are none).
func WriteList(w io.Writer, root string, rows []Summary, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no runs under %s\n", root)
		return
	}
	var buf bytes.Buffer
	defer func() { w.Write(buf.Bytes()) }()
	tw := format.NewTable(&buf, "NAME", "RUN ID", "BACKEND", "STATUS", "STAGES", "STARTED", "ELAPSED", "COST", "BEST")
	for _, r := range rows {
		best := "-"
		if r.Best != nil {
			best = fmt.Sprintf("%s %.4g", r.Metric, *r.Best)
		}
		status := r.Status
		if r.Why != "" && r.Status != "interrupted" {
			status += ": " + format.Shorten(r.Why, 40)
		}
		tw.Row(r.Name, r.RunID, r.Backend, status, fmt.Sprintf("%d/%d", r.Stages, r.Of), format.Ago(r.Started, now), format.Clock(r.ElapsedS), format.Money(r.CostUSD), best)
	}
	tw.Flush()
}
