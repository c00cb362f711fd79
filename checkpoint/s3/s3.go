// Package s3 is the checkpoint.Store of an S3 bucket (AWS, MinIO, or any S3-compatible server),
// through minio-go. Objects live under a configured prefix that no key can leave; each carries its
// sha256 in its metadata, checked on every read. Credentials come from the environment or the
// standard AWS chain only (on an instance, its profile's role through IMDSv2), never from the
// spec.
//
// Retries happen in one place, Store's own loop (minio-go's are off): transient failures are
// retried with full-jitter exponential backoff for at most Config.RetryFor (30 s by default) per
// operation; a refused request, a bad bucket name or a canceled context fail at once, and a
// failure says how many attempts it made (RetryError).
package s3

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/rubberband-hpo/rubberband/checkpoint"
)

// EnvIMDSEndpoint is the AWS SDK's variable that overrides where the instance metadata service
// is.
const EnvIMDSEndpoint = "AWS_EC2_METADATA_SERVICE_ENDPOINT"

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
	// RetryFor bounds how long one store operation retries transient failures (the server
	// unreachable or restarting, 5xx, 408, 429, throttling): no attempt starts later than
	// RetryFor after the first (default 30 s), so an operation fails within RetryFor plus its
	// last attempt. Other failures are not retried. This is the only retry layer: minio-go's
	// own retries are off.
	RetryFor time.Duration
	// Backoff and MaxBackoff shape the waits between attempts: the wait after attempt n is
	// drawn uniformly from [0, min(MaxBackoff, Backoff·2^(n-1))) (defaults 100 ms and 5 s).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// PartSize is the multipart part size for large objects (default 16 MiB).
	PartSize uint64
	// TempDir is where Put spools an object before uploading it (default os.TempDir()).
	TempDir string
}

// Store is a bucket under a prefix.
type Store struct {
	c   *minio.Client
	cfg Config
	// draw returns a random number in [0, n), for the backoff's jitter.
	draw func(n int64) int64
}

var _ checkpoint.Store = (*Store)(nil)

// Location is where the store keeps its objects: s3://BUCKET/PREFIX (checkpoint.Locator).
func (s *Store) Location() string {
	return strings.TrimSuffix("s3://"+s.cfg.Bucket+"/"+s.cfg.Prefix, "/")
}

// New connects to the bucket, creating it when it does not exist.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, fmt.Errorf("s3: no bucket")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "s3.amazonaws.com"
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = DefaultRetryFor
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
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
	// The instance profile's role last, through IMDSv2 where the AWS SDK would look for it:
	// AWS_EC2_METADATA_SERVICE_ENDPOINT when set (minio-go reads only the default address).
	imds := strings.TrimSuffix(os.Getenv(EnvIMDSEndpoint), "/")
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.FileAWSCredentials{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}, Endpoint: imds},
	})
	// MaxRetries 1 is one attempt: retry below is the only retry layer, so that its bound holds.
	c, err := minio.New(cfg.Endpoint, &minio.Options{Creds: creds, Secure: !cfg.Insecure, Region: cfg.Region, MaxRetries: 1})
	if err != nil {
		return nil, fmt.Errorf("s3: connect %s: %w", cfg.Endpoint, err)
	}
	s := &Store{c: c, cfg: cfg, draw: rand.Int64N}
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
		// Canceled on return, so that a listing left on an error does not leave its goroutine behind.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
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
