package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/checkpoint/s3"
	"github.com/rubberband-hpo/rubberband/spec"
)

// openStore builds the checkpoint store the spec names: a directory (by default the run's state
// directory) or an S3 bucket, whose credentials come from the environment or the AWS chain.
func openStore(ctx context.Context, exp *spec.Experiment, stateDir string) (checkpoint.Store, error) {
	scheme, where, prefix, err := spec.ParseCheckpoints(exp.Checkpoints.URL)
	if err != nil {
		return nil, err
	}
	if scheme == "file" {
		if where == "" {
			where = filepath.Join(stateDir, "checkpoints")
		}
		return file.New(where)
	}
	tmp := filepath.Join(stateDir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	c := exp.Checkpoints
	s, err := s3.New(ctx, s3.Config{Endpoint: c.Endpoint, Bucket: where, Prefix: prefix, Insecure: c.Insecure, Region: c.Region, TempDir: tmp})
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	return s, nil
}
