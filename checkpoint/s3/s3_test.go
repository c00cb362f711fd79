package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/storetest"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

func newStore(t testing.TB, m *servers.MinIO, prefix string) *Store {
	t.Helper()
	s, err := New(context.Background(), Config{Endpoint: m.Endpoint, Bucket: "checkpoints", Prefix: prefix, Insecure: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The same contract the file backend passes, against a real MinIO server.
func TestContract(t *testing.T) {
	m := servers.StartMinIO(t)
	n := 0
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) checkpoint.Store {
			n++
			return newStore(t, m, fmt.Sprintf("run-%d", n)) // a fresh prefix: a fresh store
		},
		Corrupt: func(t *testing.T, st checkpoint.Store, key string) {
			s := st.(*Store)
			name, _ := s.object(key)
			info, err := s.c.StatObject(context.Background(), s.cfg.Bucket, name, minio.StatObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Other bytes under the old checksum: what bit rot or a bad copy would leave.
			bad := bytes.Repeat([]byte{0xAB}, int(info.Size))
			if _, err := s.c.PutObject(context.Background(), s.cfg.Bucket, name, bytes.NewReader(bad), info.Size,
				minio.PutObjectOptions{UserMetadata: map[string]string{metaSHA: info.UserMetadata[metaSHA]}}); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// Keys stay under the store's prefix: two stores on one bucket never see each other's objects.
func TestPrefixConfinement(t *testing.T) {
	m := servers.StartMinIO(t)
	a, b := newStore(t, m, "team-a/exp"), newStore(t, m, "team-b")
	ctx := context.Background()
	if _, err := a.Put(ctx, "trials/t1/1", bytes.NewReader([]byte("a"))); err != nil {
		t.Fatal(err)
	}
	if list, _ := b.List(ctx, ""); len(list) != 0 {
		t.Fatalf("store b sees %v", list)
	}
	if list, _ := a.List(ctx, "trials/"); len(list) != 1 || list[0].Key != "trials/t1/1" {
		t.Fatalf("store a lists %v", list)
	}
	if _, err := New(ctx, Config{Endpoint: m.Endpoint, Bucket: "checkpoints", Prefix: "../escape", Insecure: true}); err == nil {
		t.Fatal("a prefix with .. was accepted")
	}
}

// MinIO killed while uploads are in flight and back 0.5 s later: every Put retries and succeeds,
// and every object reads back intact.
func TestServerRestartMidUpload(t *testing.T) {
	m := servers.StartMinIO(t)
	s := newStore(t, m, "restart")
	ctx := context.Background()
	payloads := make([][]byte, 6)
	for i := range payloads {
		payloads[i] = make([]byte, 40<<20)
		rand.Read(payloads[i])
	}
	var wg sync.WaitGroup
	errs := make([]error, len(payloads))
	for i := range payloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put(ctx, fmt.Sprintf("trials/t%d/1", i), bytes.NewReader(payloads[i]))
		}()
	}
	time.Sleep(150 * time.Millisecond)
	m.Kill()
	time.Sleep(500 * time.Millisecond)
	m.Restart()
	wg.Wait()
	for i, p := range payloads {
		if errs[i] != nil {
			t.Fatalf("put %d across the restart: %v", i, errs[i])
		}
		rc, _, err := s.Open(ctx, fmt.Sprintf("trials/t%d/1", i))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("object %d after the restart: %d bytes, %v", i, len(got), err)
		}
	}
}

// BenchmarkMigration100MB saves a 100 MB checkpoint directory from one node's work dir and
// restores it into another's, through MinIO, next to MinIO's raw loopback throughput for the
// same bytes (one PutObject and one GetObject).
func BenchmarkMigration100MB(b *testing.B) {
	m := servers.StartMinIO(b)
	s := newStore(b, m, "bench")
	ctx := context.Background()
	src := filepath.Join(b.TempDir(), "node-a", "checkpoint")
	os.MkdirAll(src, 0o755)
	data := make([]byte, 100<<20)
	rand.Read(data)
	os.WriteFile(filepath.Join(src, "model.bin"), data, 0o644)
	dst := filepath.Join(b.TempDir(), "node-b", "checkpoint")
	var migrate, raw time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := checkpoint.SaveDir(ctx, s, "t1", src); err != nil {
			b.Fatal(err)
		}
		if _, ok, err := checkpoint.RestoreDir(ctx, s, "t1", dst); err != nil || !ok {
			b.Fatal(ok, err)
		}
		migrate += time.Since(start)
		start = time.Now()
		if _, err := s.c.PutObject(ctx, "checkpoints", "raw", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{PartSize: 16 << 20}); err != nil {
			b.Fatal(err)
		}
		o, err := s.c.GetObject(ctx, "checkpoints", "raw", minio.GetObjectOptions{})
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, o)
		o.Close()
		raw += time.Since(start)
	}
	mb := float64(len(data)) / (1 << 20) * float64(b.N)
	b.ReportMetric(migrate.Seconds()/float64(b.N), "s/migration")
	b.ReportMetric(mb/migrate.Seconds(), "MB/s-migration")
	b.ReportMetric(mb/raw.Seconds(), "MB/s-raw")
}
