package rundir_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
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
