package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/rundir"
)

func runDirsUnder(root string) []string { return rundir.Dirs(root) }

// runsHub keeps the runs page's table: each run replayed again only when its journal or its
// driver changed, or while it runs.
type runsHub struct {
	s    *Server
	feed feed

	mu      sync.Mutex
	cache   map[string]runsEntry
	version int
	last    template.HTML
}

type runsEntry struct {
	size  int64
	mod   time.Time
	live  bool
	st    *rundir.State
	row   runRow
	dirty bool
}

// runRow is one row of the runs page.
type runRow struct {
	rundir.Summary
	DeadlineS, PredCostUSD, BudgetUSD float64
	Live                              bool
}

func newRunsHub(s *Server) *runsHub { return &runsHub{s: s, cache: map[string]runsEntry{}} }

func (h *runsHub) rows() []runRow {
	var rows []runRow
	seen := map[string]bool{}
	for _, dir := range rundir.Dirs(h.s.cfg.Root) {
		seen[dir] = true
		info, err := os.Stat(filepath.Join(dir, rundir.Journal))
		var size int64
		var mod time.Time
		if err == nil {
			size, mod = info.Size(), info.ModTime()
		}
		_, live, _ := rundir.ReadHolder(dir)
		e, ok := h.cache[dir]
		if ok && e.size == size && e.mod.Equal(mod) && e.live == live && !live {
			rows = append(rows, e.row)
			continue
		}
		e = runsEntry{size: size, mod: mod, live: live, st: e.st}
		if e.st == nil {
			e.st, err = rundir.Open(dir)
		}
		var v *rundir.View
		if err == nil {
			v, err = rundir.NewView(e.st)
		}
		if err != nil { // one damaged run does not hide the others
			e.row = runRow{Summary: rundir.Summary{Name: filepath.Base(dir), Dir: dir, Status: "unreadable", Why: err.Error()}}
			e.st = nil
		} else {
			e.row = runRow{Summary: v.Summary(), DeadlineS: e.st.Exp.Deadline.Seconds(), PredCostUSD: e.st.Plan.Predicted.Cost.Mean,
				BudgetUSD: e.st.Exp.Budget.MaxCostUSD, Live: v.Live}
		}
		h.cache[dir] = e
		rows = append(rows, e.row)
	}
	for dir := range h.cache {
		if !seen[dir] {
			delete(h.cache, dir)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Started.Before(rows[j].Started) })
	return rows
}

type runsPage struct {
	Root    string
	Rows    []runRow
	Version int
	Plan    bool
}

func (h *runsHub) refresh() {
	h.mu.Lock()
	defer h.mu.Unlock()
	page := &runsPage{Root: h.s.cfg.Root, Rows: h.rows()}
	var buf bytes.Buffer
	if err := h.s.tmpl.ExecuteTemplate(&buf, "sec-runs", page); err != nil {
		fmt.Fprintf(h.s.cfg.Log, "ui: render runs: %v\n", err)
		return
	}
	html := template.HTML(buf.String())
	if html == h.last && h.version > 0 {
		return
	}
	h.version++
	h.last = html
	h.feed.publish(&update{Version: h.version, Sections: map[string]template.HTML{"runs": html}})
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	s.runs.refresh()
	s.runs.mu.Lock()
	page := &runsPage{Root: s.cfg.Root, Version: s.runs.version, Plan: true}
	page.Rows = s.runs.rows()
	s.runs.mu.Unlock()
	s.render(w, http.StatusOK, "runs.html", page)
}

func (s *Server) runsEvents(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, &s.runs.feed, 500*time.Millisecond, s.runs.refresh)
}
