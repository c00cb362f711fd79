package open

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/spec"
)

// What a driver writes into a remote worker's environment opens the driver's own store there,
// under the run's own prefix: a directory (the run's, by default) or an S3 bucket (a real MinIO).
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
			run := Run{Checkpoints: tc.c, Dir: filepath.Join(dir, "checkpoints"), Tmp: filepath.Join(dir, "tmp"),
				RunID: "r-" + strings.ReplaceAll(tc.name, " ", "-"), Experiment: "e", Layout: checkpoint.LayoutPerRun}
			driver, err := run.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := driver.Put(ctx, "trials/t1/000001", strings.NewReader("weights")); err != nil {
				t.Fatal(err)
			}
			// Under the run's prefix in the store itself.
			root, err := Store(ctx, tc.c, run.Dir, run.Tmp)
			if err != nil {
				t.Fatal(err)
			}
			if list, err := root.List(ctx, "runs/"+run.RunID+"/trials/"); err != nil || len(list) != 1 {
				t.Fatalf("the store's root lists %+v, %v", list, err)
			}
			env, err := run.Env()
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

// A run made by an older binary (no layout in its run.json) keeps its keys at the store's root
// and claims nothing; a run of the per-run layout is refused a prefix another run claimed, and
// the error names the URL and that run.
func TestRunLayouts(t *testing.T) {
	ctx := context.Background()
	url := "file://" + t.TempDir()
	c := spec.Checkpoints{URL: url}
	old, err := Run{Checkpoints: c, RunID: "r-old", Layout: checkpoint.LayoutShared}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Put(ctx, "trials/b0-t0000/00000001.tar", strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	root, _ := Store(ctx, c, "", "")
	if _, _, err := root.Open(ctx, "trials/b0-t0000/00000001.tar"); err != nil {
		t.Fatalf("an old run's key is not at the root: %v", err)
	}
	if _, _, err := root.Open(ctx, "runs/r-old/owner.json"); err == nil {
		t.Fatal("an old run claimed a prefix")
	}
	// Another run claimed r-new's prefix (a copied run folder, a reused ID).
	other := Run{Checkpoints: c, RunID: "r-other", Experiment: "theirs", Layout: checkpoint.LayoutPerRun}
	if _, err := other.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, "runs/r-new/owner.json", strings.NewReader(`{"run_id":"r-other","experiment":"theirs"}`)); err != nil {
		t.Fatal(err)
	}
	_, err = Run{Checkpoints: c, RunID: "r-new", Layout: checkpoint.LayoutPerRun}.Open(ctx)
	if !errors.Is(err, checkpoint.ErrClaimed) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "r-other") {
		t.Fatalf("a prefix another run claimed: %v", err)
	}
	// The owner opens it again (a resume).
	if _, err := other.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := (Run{Checkpoints: c, RunID: "r-x", Layout: "flat"}).Open(ctx); err == nil || !strings.Contains(err.Error(), `"flat"`) {
		t.Fatalf("an unknown layout: %v", err)
	}
}
