package ui

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	rbclock "github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A page that followed its run's journal as it grew, folding each piece as it came, shows what
// a page drawn from the whole journal at once shows; and its charts are what a replay of the
// events draws: the learning curves of every report, the cost billed at each moment.
func TestFollowedPageIsTheWholeJournalsPage(t *testing.T) {
	root := t.TempDir()
	dir, err := rundirtest.Large(root, "grown", 40, 27, 0)
	if err != nil {
		t.Fatal(err)
	}
	path, lines, err := rundirtest.JournalLines(dir)
	if err != nil {
		t.Fatal(err)
	}
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	followed := testHub(t, root, "grown", Config{})
	for i, n := 0, len(lines)/5+1; i < len(lines); i += n { // five pieces, each folded as it is appended
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(bytes.Join(lines[i:min(i+n, len(lines))], nil))
		f.Close()
		followed.refresh()
	}
	page := followed.current()
	if page.Seq != len(events) {
		t.Fatalf("the followed page read %d events of %d", page.Seq, len(events))
	}

	h := testHub(t, root, "grown", Config{})
	h.current()
	for _, sec := range runSections {
		if followed.last[sec] != h.last[sec] {
			t.Errorf("section %s of the followed page differs from the whole journal's", sec)
		}
	}

	st, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := followed.pf.curves.Curves(), replayedCurves(st.Exp, events); !reflect.DeepEqual(got, want) {
		t.Errorf("the folded learning curves differ from the events' (%d curves, want %d)", len(got), len(want))
	}
	last := events[len(events)-1].At
	got := followed.pf.realized(followed.fold, last)
	want := replayedCosts(t, st, events, last)
	if len(got) != len(want) || len(got) < 2 {
		t.Fatalf("%d cost readings, want %d (more than one)", len(got), len(want))
	}
	for i := range got {
		if !got[i].at.Equal(want[i].at) || got[i].ok != want[i].ok || (got[i].ok && got[i].cost != want[i].cost) {
			t.Errorf("cost reading %d: %v %v %v, a replay up to it says %v %v %v", i, got[i].at, got[i].ok, got[i].cost, want[i].at, want[i].ok, want[i].cost)
		}
	}

	id := events[len(events)-1].Trial
	for _, e := range events {
		if e.Ev == journal.EvTrial {
			id = e.Trial
		}
	}
	if p, err := rundir.TrialLogIn(dir, followed.pf.trials, id); err != nil || p != filepath.Join(dir, rundir.LogsDir, id+".log") {
		t.Errorf("trial %s's log: %q, %v", id, p, err)
	}
	if _, err := rundir.TrialLogIn(dir, followed.pf.trials, "no-such-trial"); !errors.Is(err, rundir.ErrNoTrial) {
		t.Errorf("an unknown trial's log: %v, want ErrNoTrial", err)
	}
}

// replayedCurves are the learning curves as the events say them, gathered after the fact: each
// trial's reports sorted by iteration, each promotion marked at its stage's last report.
func replayedCurves(exp *spec.Experiment, events []journal.Event) []rundir.Curve {
	var out []rundir.Curve
	index := map[string]int{}
	for _, e := range events {
		v, ok := e.Metrics[exp.Objective.Metric]
		if e.Ev != journal.EvReport || !ok {
			continue
		}
		i, seen := index[e.Trial]
		if !seen {
			i = len(out)
			index[e.Trial] = i
			out = append(out, rundir.Curve{Trial: e.Trial})
		}
		out[i].X, out[i].Y = append(out[i].X, float64(e.Iter)), append(out[i].Y, v)
	}
	for i := range out {
		c := &out[i]
		idx := make([]int, len(c.X))
		for j := range idx {
			idx[j] = j
		}
		sort.SliceStable(idx, func(a, b int) bool { return c.X[idx[a]] < c.X[idx[b]] })
		x, y := make([]float64, len(idx)), make([]float64, len(idx))
		for j, k := range idx {
			x[j], y[j] = c.X[k], c.Y[k]
		}
		c.X, c.Y = x, y
	}
	brackets := exp.Algorithm.Brackets()
	for _, e := range events {
		if e.Ev != journal.EvSync || e.Stage+1 >= len(brackets[e.Bracket].Stages) {
			continue
		}
		end := float64(brackets[e.Bracket].Stages[e.Stage].EndIter())
		for _, id := range e.Keep {
			if i, ok := index[id]; ok {
				for j := len(out[i].X) - 1; j >= 0; j-- {
					if out[i].X[j] <= end {
						out[i].Marks = append(out[i].Marks, j)
						break
					}
				}
			}
		}
	}
	return out
}

// replayedCosts bill a fresh replay of the events up to each moment the cost chart reads
// (each stage's start and sync, each node's coming up and release, and now), 30 at most.
func replayedCosts(t *testing.T, st *rundir.State, events []journal.Event, now time.Time) []costPoint {
	var at []time.Time
	for _, e := range events {
		switch e.Ev {
		case journal.EvStage, journal.EvSync, journal.EvNodeUp, journal.EvNodeOff:
			at = append(at, e.At)
		}
	}
	at = append(at, now)
	var picked []time.Time
	for i := 0; i < min(30, len(at)); i++ {
		if len(at) <= 30 {
			picked = append(picked, at[i])
			continue
		}
		step := float64(len(at)-1) / 29
		picked = append(picked, at[int(float64(i)*step+0.5)])
	}
	var out []costPoint
	for _, m := range picked {
		s, err := runstate.New(st.RunPlan(), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.At.After(m) {
				break
			}
			s.Apply(e)
		}
		out = append(out, costPoint{at: m, cost: s.Bill(m).Total, ok: !s.Start.IsZero()})
	}
	return out
}

// A stream that holds the previous version is sent the sections that changed, and they make the
// latest page of it; one further behind is sent every section.
func TestStreamIsSentWhatChanged(t *testing.T) {
	root := t.TempDir()
	events := firstStage()
	j := handMade(t, root, "diff", events[:11])
	h := testHub(t, root, "diff", Config{})
	latest := func() *update { return latestUpdate(h) }
	first := latest()
	if got := first.to(0); len(got.Sections) != len(runSections) {
		t.Fatalf("the first update holds %d sections, want all %d", len(got.Sections), len(runSections))
	}
	j.Append(events[11]) // the sync: the progress changes, the spec does not
	next := latest()
	if next.Version != first.Version+1 {
		t.Fatalf("version %d after %d", next.Version, first.Version)
	}
	diff := next.to(first.Version)
	if len(diff.Sections) == 0 || len(diff.Sections) == len(runSections) {
		t.Fatalf("the update after one event sends %d sections of %d: want those that changed", len(diff.Sections), len(runSections))
	}
	have := maps.Clone(first.Sections)
	maps.Copy(have, diff.Sections)
	if !maps.Equal(have, next.Sections) {
		t.Errorf("the sections sent, put over the previous version's, are not the latest page")
	}
	for sec, html := range diff.Sections {
		if first.Sections[sec] == html {
			t.Errorf("section %s is sent though it did not change", sec)
		}
	}
	if behind := next.to(first.Version - 1); len(behind.Sections) != len(runSections) {
		t.Errorf("a stream two versions behind is sent %d sections, want all %d", len(behind.Sections), len(runSections))
	}
}

// A live run's large sections are held back and sent once in a few renderings, not with each;
// what was held is sent at once when the run stops.
func TestLargeSectionsAreSentEveryFewRenderings(t *testing.T) {
	for _, stops := range []bool{false, true} {
		root := t.TempDir()
		events := firstStage()
		j := handMade(t, root, "big", events[:11])
		lock, err := rundir.LockDir(filepath.Join(root, "big"), "r-x", nil)
		if err != nil {
			t.Fatal(err)
		}
		h := testHub(t, root, "big", Config{Clock: rbclock.Frozen{At: at(20)}})
		h.big = 0 // every section is large
		latest := func() *update { return latestUpdate(h) }
		first := latest()
		j.Append(events[11]) // the sync: the progress changes
		if u := latest(); u.Version != first.Version {
			t.Fatalf("a live run's large sections were sent at once (version %d after %d)", u.Version, first.Version)
		}
		if stops {
			lock.Close()
			u := latest()
			if u.Version != first.Version+1 || u.to(first.Version).Sections["progress"] == "" {
				t.Fatalf("a stopped run's held sections: version %d after %d, progress sent: %v", u.Version, first.Version, u.Sections["progress"] != "")
			}
			continue
		}
		for i := 1; i < bigEvery; i++ {
			j.Append(journal.Event{Ev: journal.EvForecast, At: at(13), Reason: "the plan holds"})
			if u := latest(); u.Version != first.Version {
				t.Fatalf("rendering %d sent the held sections (version %d)", i+1, u.Version)
			}
		}
		j.Append(journal.Event{Ev: journal.EvForecast, At: at(13), Reason: "the plan holds"})
		u := latest()
		if u.Version != first.Version+1 {
			t.Fatalf("after %d renderings the held sections are not sent (version %d)", bigEvery+1, u.Version)
		}
		var buf bytes.Buffer
		if err := h.s.tmpl.ExecuteTemplate(&buf, "sec-progress", h.page); err != nil {
			t.Fatal(err)
		}
		if got := u.to(first.Version).Sections["progress"]; string(got) != buf.String() {
			t.Errorf("the progress sent is not the page's now")
		}
		lock.Close()
	}
}

// The stream's poller does not rebuild a page before the pause its last build earned.
func TestPollerWaitsOutTheBuildsPause(t *testing.T) {
	root := t.TempDir()
	events := firstStage()
	j := handMade(t, root, "paced", events[:11])
	h := testHub(t, root, "paced", Config{})
	h.refresh()
	seq := h.page.Seq
	j.Append(events[11])
	h.mu.Lock()
	h.pollAfter = time.Now().Add(time.Hour)
	h.mu.Unlock()
	if h.pollRefresh(); h.page.Seq != seq {
		t.Errorf("the poller rebuilt the page before its pause ended")
	}
	h.mu.Lock()
	h.pollAfter = time.Time{}
	h.mu.Unlock()
	if h.pollRefresh(); h.page.Seq != seq+1 {
		t.Errorf("the poller did not rebuild the page after its pause: seq %d", h.page.Seq)
	}
}

// testHub is the hub of run name under root, of a new server with cfg (its Root and Log set).
func testHub(t *testing.T, root, name string, cfg Config) *hub {
	t.Helper()
	cfg.Root, cfg.Log = root, io.Discard
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	h, err := s.hub(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// latestUpdate refreshes h and returns what its feed holds last.
func latestUpdate(h *hub) *update {
	h.refresh()
	h.feed.mu.Lock()
	defer h.feed.mu.Unlock()
	return h.feed.latest
}
