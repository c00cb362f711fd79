package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// benchRunPage serves the run page of a finished run of trials trials (journal synthesized) and
// times a fresh server's first GET of it: the journal read, the page built, sent.
func benchRunPage(b *testing.B, trials int) {
	root := b.TempDir()
	if _, err := rundirtest.Large(root, "large", trials, 729, 0); err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for b.Loop() {
		s, err := New(Config{Root: root, Log: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(s)
		resp, err := http.Get(hs.URL + "/runs/large")
		if err != nil {
			b.Fatal(err)
		}
		bytes, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		hs.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET /runs/large: %s", resp.Status)
		}
	}
	b.ReportMetric(float64(bytes), "page-bytes")
}

func BenchmarkRunPage10k(b *testing.B)  { benchRunPage(b, 10_000) }
func BenchmarkRunPage100k(b *testing.B) { benchRunPage(b, 100_000) }

// BenchmarkRunPageUpdate100k times what one more event costs a followed 100,000-trial run's
// page: the journal's new record read and folded, the page rebuilt and its sections rendered
// for the stream.
func BenchmarkRunPageUpdate100k(b *testing.B) {
	root := b.TempDir()
	dir, err := rundirtest.Large(root, "large", 100_000, 729, 0)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Root: root, Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	h, err := s.hub("large")
	if err != nil {
		b.Fatal(err)
	}
	h.current() // caught up
	j, _, err := journal.OpenJournalWith(filepath.Join(dir, rundir.Journal), journal.JournalOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	var sent int
	for b.Loop() {
		if err := j.Note(journal.Event{Ev: journal.EvForecast, Stage: 6, Reason: "the plan holds"}); err != nil {
			b.Fatal(err)
		}
		h.refresh()
		sent = 0
		for _, sec := range h.last {
			sent += len(sec)
		}
	}
	b.ReportMetric(float64(sent), "update-bytes")
}
