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
	// EnvPrefix is the run's own prefix in the store (checkpoint.RunPrefix), which the remote
	// process opens the store under, as the driver does.
	EnvPrefix = "RB_CHECKPOINTS_PREFIX"
)

// Run is a run's checkpoint store: the one the spec names, under the run's own prefix by the
// layout the run was created with.
type Run struct {
	Checkpoints spec.Checkpoints
	Dir         string // the store when Checkpoints names none (the run's own folder)
	Tmp         string // temporary files of S3
	RunID       string
	Experiment  string
	Layout      string // checkpoint.LayoutShared or checkpoint.LayoutPerRun
}

// Open opens the run's store under its prefix and, in the per-run layout, claims it
// (checkpoint.Claim): a prefix that holds another run's keys is refused, naming the URL.
func (r Run) Open(ctx context.Context) (checkpoint.Store, error) {
	prefix, err := checkpoint.RunPrefix(r.Layout, r.RunID)
	if err != nil {
		return nil, err
	}
	base, err := Store(ctx, r.Checkpoints, r.Dir, r.Tmp)
	if err != nil {
		return nil, err
	}
	s, err := checkpoint.Prefixed(base, prefix)
	if err != nil || prefix == "" {
		return s, err
	}
	if err := checkpoint.Claim(ctx, s, checkpoint.Owner{RunID: r.RunID, Experiment: r.Experiment}); err != nil {
		return nil, fmt.Errorf("checkpoints.url %s, prefix %s: %w", r.where(), prefix, err)
	}
	return s, nil
}

// Env is the environment that opens the run's store, under its prefix, in a remote process
// (FromEnv).
func (r Run) Env() ([]string, error) {
	prefix, err := checkpoint.RunPrefix(r.Layout, r.RunID)
	if err != nil {
		return nil, err
	}
	return Env(r.Checkpoints, r.Dir, prefix)
}

func (r Run) where() string {
	if r.Checkpoints.URL == "" {
		return "file://" + r.Dir + " (the run's folder)"
	}
	return r.Checkpoints.URL
}

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

// Env is the environment that tells a remote process where c's store is (dir, made absolute,
// when c names none) and the prefix it opens it under (checkpoint.Prefixed; "" for the root).
func Env(c spec.Checkpoints, dir, prefix string) ([]string, error) {
	url := c.URL
	if url == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		url = "file://" + abs
	}
	return []string{EnvURL + "=" + url, EnvEndpoint + "=" + c.Endpoint, EnvInsecure + "=" + strconv.FormatBool(c.Insecure), EnvRegion + "=" + c.Region, EnvPrefix + "=" + prefix}, nil
}

// FromEnv opens the store that Env described, under its prefix, as this process's environment
// holds it; tmp holds temporary files. It claims nothing: the driver did.
func FromEnv(ctx context.Context, tmp string) (checkpoint.Store, error) {
	insecure, _ := strconv.ParseBool(os.Getenv(EnvInsecure))
	c := spec.Checkpoints{URL: os.Getenv(EnvURL), Endpoint: os.Getenv(EnvEndpoint), Insecure: insecure, Region: os.Getenv(EnvRegion)}
	s, err := Store(ctx, c, "", tmp)
	if err != nil {
		return nil, err
	}
	return checkpoint.Prefixed(s, os.Getenv(EnvPrefix))
}
