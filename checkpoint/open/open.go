package open

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/checkpoint/s3"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The environment that tells a remote process where the checkpoints are (Env).
const (
	EnvURL      = "RB_CHECKPOINTS"
	EnvEndpoint = "RB_CHECKPOINTS_ENDPOINT"
	EnvInsecure = "RB_CHECKPOINTS_INSECURE"
	EnvRegion   = "RB_CHECKPOINTS_REGION"
)

// Store opens the store c names: a directory (dir when c names none) or an S3 bucket, whose
// credentials come from the environment or the AWS chain; tmp holds S3's temporary files (made
// 0700 when missing).
func Store(ctx context.Context, c spec.Checkpoints, dir, tmp string) (checkpoint.Store, error) {
	scheme, where, prefix, err := spec.ParseCheckpoints(c.URL)
	if err != nil {
		return nil, err
	}
	if scheme == "file" {
		if where == "" {
			where = dir
		}
		return file.New(where)
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	s, err := s3.New(ctx, s3.Config{Endpoint: c.Endpoint, Bucket: where, Prefix: prefix, Insecure: c.Insecure, Region: c.Region, TempDir: tmp})
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	return s, nil
}

// Env is the environment that tells a remote process where c's store is: dir, made absolute,
// when c names none.
func Env(c spec.Checkpoints, dir string) ([]string, error) {
	url := c.URL
	if url == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		url = "file://" + abs
	}
	return []string{EnvURL + "=" + url, EnvEndpoint + "=" + c.Endpoint, EnvInsecure + "=" + strconv.FormatBool(c.Insecure), EnvRegion + "=" + c.Region}, nil
}

// FromEnv opens the store that Env described, as this process's environment holds it; tmp holds
// temporary files.
func FromEnv(ctx context.Context, tmp string) (checkpoint.Store, error) {
	insecure, _ := strconv.ParseBool(os.Getenv(EnvInsecure))
	c := spec.Checkpoints{URL: os.Getenv(EnvURL), Endpoint: os.Getenv(EnvEndpoint), Insecure: insecure, Region: os.Getenv(EnvRegion)}
	return Store(ctx, c, "", tmp)
}
