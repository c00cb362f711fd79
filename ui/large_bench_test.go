package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
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

// BenchmarkRunPageUpdate100k times what one more event costs a followed live 100,000-trial run's
// page: the journal's new record read and folded, the page rebuilt and its sections rendered
// for the stream; update-bytes is what a stream that held the version before is sent by the
// last, mean-update-bytes by each on average (large sections are held back: sent every few).
func BenchmarkRunPageUpdate100k(b *testing.B) {
	root := b.TempDir()
	dir, err := rundirtest.Large(root, "large", 100_000, 729, 0)
	if err != nil {
		b.Fatal(err)
	}
	lock, err := rundir.LockDir(dir, "r20000101-000000-synth", nil) // live, as while its driver runs
	if err != nil {
		b.Fatal(err)
	}
	defer lock.Close()
	s, err := New(Config{Root: root, Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	h, err := s.hub("large")
	if err != nil {
		b.Fatal(err)
	}
	page := h.current() // caught up
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	held := float64(ms.HeapAlloc) / (1 << 20) // what following the run keeps
	first, metric, iter := page.Trials[0].ID, page.Metric, 10_000
	j, _, err := journal.OpenJournalWith(filepath.Join(dir, rundir.Journal), journal.JournalOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	var sent, total int
	for b.Loop() {
		iter++ // the first trial of the table reports once more: its row and its curve change
		if err := j.Note(journal.Event{Ev: journal.EvReport, Trial: first, Iter: iter, Metrics: map[string]float64{metric: 1e9}}); err != nil {
			b.Fatal(err)
		}
		before := h.version
		h.refresh()
		h.feed.mu.Lock()
		u := h.feed.latest
		h.feed.mu.Unlock()
		sent = 0
		if u.Version != before { // what a stream that held the version before is sent
			msg, err := json.Marshal(u.to(before))
			if err != nil {
				b.Fatal(err)
			}
			sent = len(msg)
		}
		total += sent
	}
	b.ReportMetric(float64(total)/float64(b.N), "mean-update-bytes")
	b.ReportMetric(held, "held-MiB")
	b.ReportMetric(float64(sent), "update-bytes")
	for sec, html := range h.last {
		b.ReportMetric(float64(len(html)), sec+"-bytes")
	}
}
