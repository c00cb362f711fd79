package rundir_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// editCache changes the entries of a run's view cache whose key starts with prefix to what
// edit makes of them.
func editCache(t *testing.T, dir, prefix string, edit func([]byte) []byte) {
	t.Helper()
	path := filepath.Join(dir, rundir.ViewCache)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no view cache: %v", err)
	}
	var c map[string]json.RawMessage
	var entries map[string][]byte
	if err := json.Unmarshal(b, &c); err != nil || json.Unmarshal(c["entries"], &entries) != nil {
		t.Fatalf("view cache: %v", err)
	}
	n := 0
	for k, v := range entries {
		if strings.HasPrefix(k, prefix) {
			entries[k] = edit(v)
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no entry %s… in the view cache", prefix)
	}
	c["entries"], _ = json.Marshal(entries)
	b, _ = json.Marshal(c)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// `list` and `status` keep what they drew of a run no driver holds beside its journal, and use
// it while the journal is the one it was drawn from; once the journal changes, they draw from
// the journal again.
func TestViewCacheKeepsAFinishedRunsDrawing(t *testing.T) {
	root := t.TempDir()
	dir, err := rundirtest.Large(root, "big", 27, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := rundir.List(root)
	if len(rows) != 1 || rows[0].Status != "finished" {
		t.Fatalf("rows %+v; want one finished", rows)
	}
	st, err := rundir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	status, live, err := rundir.StatusNow(st, rundir.StatusOptions{})
	if err != nil || live || !strings.Contains(string(status), "finished") {
		t.Fatalf("status %q, live %v, %v", status, live, err)
	}
	var report bytes.Buffer
	if err := rundir.Report(st, &report, false, ""); err != nil || !strings.Contains(report.String(), "finished") {
		t.Fatalf("report %q, %v", report.String(), err)
	}
	// What is changed in the cache is what they show: the cache is read, not the journal.
	editCache(t, dir, "summary", func(b []byte) []byte {
		var s map[string]any
		json.Unmarshal(b, &s)
		s["cost_usd"] = 12345.0
		b, _ = json.Marshal(s)
		return b
	})
	editCache(t, dir, "status", func([]byte) []byte { return []byte("from the cache\n") })
	editCache(t, dir, "report", func([]byte) []byte { return []byte("report from the cache\n") })
	var cached bytes.Buffer
	if err := rundir.Report(st, &cached, false, ""); err != nil || cached.String() != "report from the cache\n" {
		t.Fatalf("report %q, %v; want the cached one", cached.String(), err)
	}
	if got := rundir.List(root)[0].CostUSD; got != 12345 {
		t.Fatalf("cost %v; want the cached 12345", got)
	}
	if out, _, _ := rundir.StatusNow(st, rundir.StatusOptions{}); string(out) != "from the cache\n" {
		t.Fatalf("status %q; want the cached one", out)
	}
	// The journal grows: the cache is not its drawing any more.
	j, _, err := journal.OpenJournalWith(filepath.Join(dir, rundir.Journal), journal.JournalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(journal.Event{Ev: journal.EvCancel, Error: "cancelled"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if got := rundir.List(root)[0]; got.CostUSD != rows[0].CostUSD {
		t.Errorf("cost %v after the journal grew; want the journal's %v", got.CostUSD, rows[0].CostUSD)
	}
	if out, _, _ := rundir.StatusNow(st, rundir.StatusOptions{}); string(out) != string(status) {
		t.Errorf("status after the journal grew:\n%s\nwant the journal's:\n%s", out, status)
	}
}
