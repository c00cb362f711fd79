package mirror_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/rundir/rundirtest"
)

// BenchmarkRestore100k times what a server that does not drive a 100,000-trial run pays to
// bring its copy up to date from a folder mirror before it answers a request: once with nothing
// new, once with one more record in the journal.
func BenchmarkRestore100k(b *testing.B) {
	ctx := context.Background()
	src, err := rundirtest.Large(b.TempDir(), "large", 100_000, 729, 0)
	if err != nil {
		b.Fatal(err)
	}
	store := &mirror.Dir{Root: b.TempDir()}
	p := &mirror.Pusher{Store: store, Run: "large", Dir: src, Layout: rundir.MirrorLayout()}
	if err := p.Push(ctx); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(src, rundir.Journal))
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Append(ctx, "large", rundir.Journal, 0, data); err != nil {
		b.Fatal(err)
	}
	here := filepath.Join(b.TempDir(), "large")
	if _, err := mirror.Restore(ctx, store, "large", here, rundir.MirrorLayout(), time.Now()); err != nil {
		b.Fatal(err)
	}
	size := int64(len(data))
	b.Run("unchanged", func(b *testing.B) {
		for b.Loop() {
			if _, err := mirror.Restore(ctx, store, "large", here, rundir.MirrorLayout(), time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-more-record", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			line := []byte(`{"ev":"forecast","reason":"the plan holds"}` + "\n") // bytes to copy: Restore reads no records
			if err := store.Append(ctx, "large", rundir.Journal, size, line); err != nil {
				b.Fatal(err)
			}
			size += int64(len(line))
			b.StartTimer()
			if _, err := mirror.Restore(ctx, store, "large", here, rundir.MirrorLayout(), time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
