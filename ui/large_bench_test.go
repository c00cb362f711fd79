package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

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
