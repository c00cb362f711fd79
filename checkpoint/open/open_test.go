package open

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/checkpoint/s3"
	"github.com/rubberband-hpo/rubberband/internal/servers"
	"github.com/rubberband-hpo/rubberband/spec"
)

// What a driver writes into a remote worker's environment opens the driver's own store there:
// a directory (the run's, by default) or an S3 bucket (a real MinIO).
func TestEnvOpensTheSameStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mc := servers.StartMinIO(t)
	for _, tc := range []struct {
		name string
		c    spec.Checkpoints
	}{
		{"default directory", spec.Checkpoints{}},
		{"file URL", spec.Checkpoints{URL: "file://" + filepath.Join(dir, "elsewhere")}},
		{"s3", spec.Checkpoints{URL: "s3://checkpoints/runs", Endpoint: mc.Endpoint, Insecure: true, Region: "us-east-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			driver, err := Store(ctx, tc.c, filepath.Join(dir, "checkpoints"), filepath.Join(dir, "tmp"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := driver.Put(ctx, "trials/t1/000001", strings.NewReader("weights")); err != nil {
				t.Fatal(err)
			}
			env, err := Env(tc.c, filepath.Join(dir, "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			worker, err := FromEnv(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			switch worker.(type) {
			case *file.Store, *s3.Store:
			default:
				t.Fatalf("a %T", worker)
			}
			r, _, err := worker.Open(ctx, "trials/t1/000001")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if b, err := io.ReadAll(r); err != nil || string(b) != "weights" {
				t.Fatalf("the worker read %q, %v", b, err)
			}
		})
	}
}
