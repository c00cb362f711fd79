package rundir_test

import (
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// BenchmarkFollowed100k times what the server's run API does with a followed 100,000-trial
// run (its Follower caught up): a view after one more record (/status, /trials), the status
// rendered, a trial's log found (/logs?trial=), the best trial (/best: the first asked of a
// follower, and later ones) and the report (/report), each after one more record.
func BenchmarkFollowed100k(b *testing.B) {
	dir, err := rundirtest.Large(b.TempDir(), "large", 100_000, 729, 0)
	if err != nil {
		b.Fatal(err)
	}
	f, err := rundir.FollowRun(dir)
	if err != nil {
		b.Fatal(err)
	}
	v, err := f.View()
	if err != nil {
		b.Fatal(err)
	}
	j, _, err := journal.OpenJournalWith(filepath.Join(dir, rundir.Journal), journal.JournalOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			if err := j.Note(journal.Event{Ev: journal.EvForecast, Stage: 6, Reason: "the plan holds"}); err != nil {
				b.Fatal(err)
			}
			if v, err = f.View(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("status", func(b *testing.B) {
		for b.Loop() {
			if _, err := rundir.RenderStatus(v, rundir.StatusOptions{JSON: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("trial-log", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.TrialLog(v.Res.Trials[len(v.Res.Trials)/2].ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	note := func(b *testing.B) {
		if err := j.Note(journal.Event{Ev: journal.EvForecast, Stage: 6, Reason: "the plan holds"}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("best-first", func(b *testing.B) { // the follower folds the run's curves and results: the journal read again once
		for b.Loop() {
			b.StopTimer()
			g, err := rundir.FollowRun(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := g.Best(); err != nil {
				b.Fatal(err)
			}
		}
	})
	f.Best()
	b.Run("best", func(b *testing.B) {
		for b.Loop() {
			note(b)
			if _, err := f.Best(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("report", func(b *testing.B) {
		for b.Loop() {
			note(b)
			rep, err := f.Report(time.Now())
			if err != nil {
				b.Fatal(err)
			}
			if err := rep.WriteReport(io.Discard, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
