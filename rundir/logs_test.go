package rundir

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
)

// A trial's log is found from the journal as far as it is written; before the journal there is
// no trial to name.
func TestTrialLogOf(t *testing.T) {
	dir := t.TempDir()
	if _, err := TrialLogOf(dir, "b0-t0000"); !errors.Is(err, ErrNoTrial) {
		t.Errorf("no journal yet: %v, want ErrNoTrial", err)
	}
	j, _, err := journal.OpenJournal(filepath.Join(dir, Journal))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := j.Append(journal.Event{Ev: journal.EvStart, At: at, RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(journal.Event{Ev: journal.EvTrial, At: at, Trial: "b0-t0000"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if got, err := TrialLogOf(dir, "b0-t0000"); err != nil || got != filepath.Join(dir, LogsDir, "b0-t0000.log") {
		t.Errorf("b0-t0000: %q, %v", got, err)
	}
	if _, err := TrialLogOf(dir, "b0-t0001"); !errors.Is(err, ErrNoTrial) {
		t.Errorf("a trial the journal does not name: %v, want ErrNoTrial", err)
	}
}
