// Package s3 is the checkpoint.Store of an S3 bucket (AWS, MinIO, or any S3-compatible server),
// through minio-go. Objects live under a configured prefix that no key can leave; each carries its
// sha256 in its metadata, checked on every read. Credentials come from the environment or the
// standard AWS chain only, never from the spec.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/rubberband-hpo/rubberband/checkpoint"
)

// metaSHA is the user metadata key holding an object's sha256 (x-amz-meta-rb-sha256).
const metaSHA = "Rb-Sha256"

// Config locates the bucket.
type Config struct {
	// Endpoint is host:port of the S3 server; empty means AWS S3 (s3.amazonaws.com).
	Endpoint string
	Bucket   string
	// Prefix is prepended to every key ("experiments/x"); keys cannot escape it.
	Prefix string
	// Insecure talks plain HTTP (a local MinIO).
	Insecure bool
	Region   string
	// Retries bounds attempts per operation on transient errors (default 6), with exponential
	// backoff from Backoff (default 200 ms).
	Retries int
	Backoff time.Duration
	// PartSize is the multipart part size for large objects (default 16 MiB).
	PartSize uint64
	// TempDir is where Put spools an object before uploading it (default os.TempDir()).
	TempDir string
}

// Store is a bucket under a prefix.
type Store struct {
	c   *minio.Client
	cfg Config
}

// New connects to the bucket, creating it when it does not exist.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("s3: no bucket")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "s3.amazonaws.com"
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 6
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = 16 << 20
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix != "" {
		if err := checkpoint.CheckKey(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("s3: prefix: %w", err)
		}
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.FileAWSCredentials{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
	})
	c, err := minio.New(cfg.Endpoint, &minio.Options{Creds: creds, Secure: !cfg.Insecure, Region: cfg.Region})
	if err != nil {
		return nil, fmt.Errorf("s3: connect %s: %w", cfg.Endpoint, err)
	}
	s := &Store{c: c, cfg: cfg}
	err = s.retry(ctx, func() error {
		ok, err := c.BucketExists(ctx, cfg.Bucket)
		if err != nil || ok {
			return err
		}
		if err := c.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{Region: cfg.Region}); err != nil {
			if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
				return nil
			}
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("s3: bucket %s: %w", cfg.Bucket, err)
	}
	return s, nil
}

func (s *Store) object(key string) (string, error) {
	if err := checkpoint.CheckKey(key); err != nil {
		return "", err
	}
	if s.cfg.Prefix == "" {
		return key, nil
	}
	return s.cfg.Prefix + "/" + key, nil
}

// Put spools r to a temporary file while hashing it, then uploads the file (multipart when
// large) with its sha256 in the metadata, retrying transient failures from the start of the file.
// S3 makes an object visible whole or not at all.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (checkpoint.Info, error) {
	name, err := s.object(key)
	if err != nil {
		return checkpoint.Info{}, err
	}
	f, err := os.CreateTemp(s.cfg.TempDir, "rubberband-s3-put-*")
	if err != nil {
		return checkpoint.Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	hr := &checkpoint.HashingReader{R: r}
	if _, err := io.Copy(f, hr); err != nil {
		return checkpoint.Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	sum := hr.Sum()
	err = s.retry(ctx, func() error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := s.c.PutObject(ctx, s.cfg.Bucket, name, f, hr.Size, minio.PutObjectOptions{
			UserMetadata: map[string]string{metaSHA: sum}, PartSize: s.cfg.PartSize,
			ContentType: "application/octet-stream", DisableMultipart: hr.Size < int64(s.cfg.PartSize),
		})
		return err
	})
	if err != nil {
		return checkpoint.Info{}, fmt.Errorf("put %s: %w", key, err)
	}
	return checkpoint.Info{Key: key, Size: hr.Size, SHA256: sum, Modified: time.Now().UTC()}, nil
}

// Open returns a reader that checks the object's sha256 at its end.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, checkpoint.Info, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	var obj *minio.Object
	var st minio.ObjectInfo
	err = s.retry(ctx, func() error {
		o, err := s.c.GetObject(ctx, s.cfg.Bucket, name, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		if st, err = o.Stat(); err != nil {
			o.Close()
			return err
		}
		obj = o
		return nil
	})
	if err != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("open %s: %w", key, err)
	}
	info := checkpoint.Info{Key: key, Size: st.Size, SHA256: st.UserMetadata[metaSHA], Modified: st.LastModified}
	return checkpoint.VerifyingReader(obj, info.SHA256), info, nil
}

// List returns the objects under the prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]checkpoint.Info, error) {
	full := prefix
	if s.cfg.Prefix != "" {
		full = s.cfg.Prefix + "/" + prefix
	}
	var out []checkpoint.Info
	err := s.retry(ctx, func() error {
		out = out[:0]
		for o := range s.c.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: full, Recursive: true, WithMetadata: true}) {
			if o.Err != nil {
				return o.Err
			}
			key := strings.TrimPrefix(o.Key, s.cfg.Prefix+"/")
			if s.cfg.Prefix == "" {
				key = o.Key
			}
			sum := o.UserMetadata["X-Amz-Meta-"+metaSHA]
			if sum == "" { // servers that do not list metadata: ask for it
				st, err := s.c.StatObject(ctx, s.cfg.Bucket, o.Key, minio.StatObjectOptions{})
				if err != nil {
					return err
				}
				sum = st.UserMetadata[metaSHA]
			}
			out = append(out, checkpoint.Info{Key: key, Size: o.Size, SHA256: sum, Modified: o.LastModified})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	return out, nil // S3 lists in key order
}

// Delete removes an object; S3 treats a missing key as deleted.
func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	if err := s.retry(ctx, func() error { return s.c.RemoveObject(ctx, s.cfg.Bucket, name, minio.RemoveObjectOptions{}) }); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// retry runs op until it succeeds, fails for good, or runs out of attempts; transient failures
// (the server unreachable or restarting, throttling, 5xx) are retried with exponential backoff.
// A missing object comes back as fs.ErrNotExist.
func (s *Store) retry(ctx context.Context, op func() error) error {
	wait := s.cfg.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		err = op()
		if err == nil {
			return nil
		}
		resp := minio.ToErrorResponse(err)
		switch resp.Code {
		case "NoSuchKey", "NoSuchObject":
			return fmt.Errorf("%w: %s", fs.ErrNotExist, resp.Message)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket", "InvalidBucketName":
			return errors.New(resp.Code + ": " + resp.Message) // never transient
		}
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %v", fs.ErrNotExist, err)
		}
		if attempt >= s.cfg.Retries || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}
