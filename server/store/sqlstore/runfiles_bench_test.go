package sqlstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

// What a mirrored driver pays per journal sync: one Append of a record (300 bytes) to the
// database, on SQLite and on a real PostgreSQL 15 over loopback. `go test -run '^$' -bench
// RunFilesAppend ./server/store/sqlstore`.
func BenchmarkRunFilesAppend(b *testing.B) {
	record := append(bytes.Repeat([]byte("x"), 299), '\n')
	bench := func(b *testing.B, url string) {
		s, err := Open(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		f, ctx := s.RunFiles(), context.Background()
		b.ResetTimer()
		for i := range b.N {
			if err := f.Append(ctx, "teams/ml/bench", "journal.jsonl", int64(i*len(record)), record); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("sqlite", func(b *testing.B) { bench(b, "sqlite:"+b.TempDir()+"/db") })
	b.Run("postgres", func(b *testing.B) { bench(b, servers.StartPostgres(b).NewDatabase(b)) })
}
