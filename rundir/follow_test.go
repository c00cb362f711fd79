package rundir_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// A Follower's views follow the journal: what was appended since the last view is in the next,
// a journal cut back is folded anew, and a changed run.json makes the follower stale.
func TestFollowerFollowsTheJournal(t *testing.T) {
	dir, err := rundirtest.Large(t.TempDir(), "big", 81, 81, 2) // its driver died in stage 3
	if err != nil {
		t.Fatal(err)
	}
	f, err := rundir.FollowRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	check := func(word string, synced int) {
		t.Helper()
		v, err := f.View()
		if err != nil {
			t.Fatal(err)
		}
		if w, _ := v.Status(); w != word {
			t.Errorf("status %q; want %q", w, word)
		}
		if s, _ := v.Stages(); s != synced {
			t.Errorf("%d stages synced; want %d", s, synced)
		}
	}
	check("interrupted", 2)
	path := filepath.Join(dir, rundir.Journal)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := journal.OpenJournalWith(path, journal.JournalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(journal.Event{Ev: journal.EvCancel, Error: "cancelled by `rubberband cancel`"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	check("cancelled", 2)

	// Cut back to before the first sync: read and folded anew.
	events, err := journal.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	cut, n := 0, 0
	for i, e := range events {
		if e.Ev == journal.EvSync {
			n = i
			break
		}
	}
	if n == 0 {
		t.Fatal("no sync in the journal")
	}
	for range n {
		cut += bytes.IndexByte(data[cut:], '\n') + 1
	}
	if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	check("interrupted", 0)

	if f.Stale() {
		t.Error("stale before its folder changed")
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.RunJSON), append(mustRead(t, filepath.Join(dir, rundir.RunJSON)), ' '), 0o600); err != nil {
		t.Fatal(err)
	}
	if !f.Stale() {
		t.Error("not stale once its run.json changed")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A followed view, which keeps no events, finds a trial's log as the journal's events do.
func TestFollowedViewFindsTrialLogs(t *testing.T) {
	dir, err := rundirtest.Large(t.TempDir(), "logs", 27, 27, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := rundir.FollowRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.View()
	if err != nil {
		t.Fatal(err)
	}
	events, err := journal.ReadJournal(filepath.Join(dir, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range events {
		if e.Ev != journal.EvTrial {
			continue
		}
		found++
		got, err := v.TrialLog(e.Trial)
		want, werr := rundir.TrialLog(dir, events, e.Trial)
		if err != nil || werr != nil || got != want {
			t.Errorf("trial %s's log: %q, %v; from the events %q, %v", e.Trial, got, err, want, werr)
		}
	}
	if found == 0 {
		t.Fatal("the run declares no trials")
	}
	_, err = v.TrialLog("b9-t9999")
	_, werr := rundir.TrialLog(dir, events, "b9-t9999")
	if !errors.Is(err, rundir.ErrNoTrial) || werr == nil || err.Error() != werr.Error() {
		t.Errorf("an unknown trial: %v; from the events: %v", err, werr)
	}
}

// A follower's report and best trial are what a replay of the whole journal says, before and
// after the journal grows.
func TestFollowerReportsAsAReplay(t *testing.T) {
	dir, err := rundirtest.Large(t.TempDir(), "rep", 81, 81, 0)
	if err != nil {
		t.Fatal(err)
	}
	path, lines, err := rundirtest.JournalLines(dir)
	if err != nil {
		t.Fatal(err)
	}
	whole := bytes.Join(lines, nil)
	half := bytes.Join(lines[:len(lines)*2/3], nil)
	if err := os.WriteFile(path, half, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := rundir.FollowRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.View(); err != nil { // followed before the report is asked for
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		now := time.Now()
		rep, err := f.Report(now)
		if err != nil {
			t.Fatal(err)
		}
		events, err := journal.ReadJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runstate.Replay(rep.State.RunPlan(), events, now) // rundir.Replay's, at the same now
		if err != nil {
			t.Fatal(err)
		}
		want := &rundir.Replayed{State: rep.State, Res: res, Search: rundir.Search(&rundir.View{State: rep.State, Res: res, Events: events})}
		var got, replayed bytes.Buffer
		rep.WriteReport(&got, true)
		want.WriteReport(&replayed, true)
		if got.String() != replayed.String() {
			t.Errorf("%s: the follower's report differs from a replay's:\n%s\nreplayed:\n%s", when, got.String(), replayed.String())
		}
		best, berr := f.Best()
		v, err := rundir.NewView(rep.State)
		if err != nil {
			t.Fatal(err)
		}
		wantBest, werr := rundir.Best(v)
		if (berr == nil) != (werr == nil) || (berr == nil && (best.Trial != wantBest.Trial || !reflect.DeepEqual(best.Curve, wantBest.Curve))) {
			t.Errorf("%s: the follower's best %+v, %v; a replay's %+v, %v", when, best, berr, wantBest, werr)
		}
	}
	check("two thirds in")
	if err := os.WriteFile(path, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	check("at the end")
	if b, err := f.Best(); err != nil || len(b.Curve) == 0 {
		t.Errorf("the finished run's best: %+v, %v", b, err)
	}
}
