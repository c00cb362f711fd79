package rundir_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// `list` keeps a finished run's row beside its journal and uses it while the journal is the
// one it was made from; once the journal changes, the row is the journal's again.
func TestListCachesAFinishedRunsRow(t *testing.T) {
	root := t.TempDir()
	dir, err := rundirtest.Large(root, "big", 27, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := rundir.List(root)
	if len(rows) != 1 || rows[0].Status != "finished" {
		t.Fatalf("rows %+v; want one finished", rows)
	}
	cache := filepath.Join(dir, rundir.SummaryCache)
	b, err := os.ReadFile(cache)
	if err != nil {
		t.Fatalf("no row kept: %v", err)
	}
	// A row changed in the cache is what list shows: the cache is read, not the journal.
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	c["summary"].(map[string]any)["cost_usd"] = 12345.0
	b, _ = json.Marshal(c)
	if err := os.WriteFile(cache, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := rundir.List(root)[0].CostUSD; got != 12345 {
		t.Fatalf("cost %v; want the cached 12345", got)
	}
	// The journal grows: the cache is not its row any more.
	j, _, err := journal.OpenJournalWith(filepath.Join(dir, rundir.Journal), journal.JournalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(journal.Event{Ev: journal.EvCancel, Error: "cancelled"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if got := rundir.List(root)[0]; got.CostUSD == 12345 || got.CostUSD != rows[0].CostUSD {
		t.Errorf("cost %v after the journal grew; want the journal's %v", got.CostUSD, rows[0].CostUSD)
	}
}
