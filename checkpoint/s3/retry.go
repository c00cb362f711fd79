package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// Retry defaults. With them a dead endpoint fails after 30 s, in about 20 attempts.
const (
	DefaultRetryFor   = 30 * time.Second
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// RetryError is a store operation that failed at the S3 server or on the way to it: how many
// attempts it made, over how long, and whether the last failure was transient (the operation
// ran out of time) or not (it was not retried).
type RetryError struct {
	Attempts  int
	Elapsed   time.Duration
	Transient bool
	Err       error
}

func (e *RetryError) Error() string {
	if e.Transient {
		return fmt.Sprintf("%v (gave up after %d attempts in %v)", e.Err, e.Attempts, e.Elapsed.Round(time.Millisecond))
	}
	if e.Attempts == 1 {
		return fmt.Sprintf("%v (not retried)", e.Err)
	}
	return fmt.Sprintf("%v (not retried, at attempt %d)", e.Err, e.Attempts)
}

// Unwrap returns the last failure.
func (e *RetryError) Unwrap() error { return e.Err }

// Unavailable says the store could not be reached or kept failing transiently until the retry
// window closed: an infrastructure fault (internal/infra), not a refusal of the request.
func (e *RetryError) Unavailable() bool { return e.Transient }

// retry runs op until it succeeds, fails in a way retrying cannot mend, or the retry window
// (Config.RetryFor) closes: no attempt starts later than RetryFor after the first one did, so
// an operation fails within RetryFor plus its last attempt's duration. Waits between attempts
// are full-jitter exponential backoff. A missing object is fs.ErrNotExist, not retried.
func (s *Store) retry(ctx context.Context, op func() error) error {
	start := time.Now()
	deadline := start.Add(s.cfg.RetryFor)
	regionMoved := false
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (after %d attempts; last failure: %v)", ctx.Err(), attempt, plain(err))
		}
		if nx := notExist(err); nx != nil {
			return nx
		}
		// minio-go learnt the bucket's region from this answer: the next attempt uses it.
		if !regionMoved && movedRegion(err) {
			regionMoved = true
			continue
		}
		giveUp := &RetryError{Attempts: attempt, Elapsed: time.Since(start), Transient: transient(err), Err: plain(err)}
		if !giveUp.Transient {
			return giveUp
		}
		left := time.Until(deadline)
		if left <= 0 {
			return giveUp
		}
		wait := min(backoff(attempt, s.cfg.Backoff, s.cfg.MaxBackoff, s.draw), left)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after %d attempts; last failure: %v)", ctx.Err(), attempt, plain(err))
		case <-time.After(wait):
		}
	}
}

// backoff is the wait after failed attempt n (1, 2, ...): drawn uniformly from
// [0, min(maxWait, base·2^(n-1))), the "full jitter" that keeps clients restarting together
// from retrying together. draw(k) returns a number in [0, k).
func backoff(n int, base, maxWait time.Duration, draw func(int64) int64) time.Duration {
	ceil := base
	for i := 1; i < n && ceil < maxWait; i++ { // doubling only below the cap cannot overflow
		ceil *= 2
	}
	ceil = min(ceil, maxWait)
	if ceil <= 0 {
		return 0
	}
	return time.Duration(draw(int64(ceil)))
}

// retryableCodes are S3 error codes that say "later", whatever the HTTP status.
var retryableCodes = map[string]bool{
	"RequestTimeout": true, "SlowDown": true, "SlowDownRead": true, "SlowDownWrite": true,
	"Throttling": true, "ThrottlingException": true, "RequestLimitExceeded": true, "RequestThrottled": true,
	"InternalError": true, "ServiceUnavailable": true, "XMinioServerNotInitialized": true,
	"ExpiredToken": true, "ExpiredTokenException": true,
}

// transient reports whether a failure may go away on its own: the server unreachable,
// restarting or overloaded (5xx, 408, 429, a throttling code), a connection cut mid-request.
// Anything else fails at once: a request the server refused (4xx), and the client's own checks
// (an invalid bucket name, an invalid argument), which minio-go reports as plain errors.
func transient(err error) bool {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		s := resp.StatusCode
		return retryableCodes[resp.Code] || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &recErr),
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return false // TLS set up wrong: the same on every attempt
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return !dnsErr.IsNotFound // a host that does not exist is a typo, not an outage
	}
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr)
}

// notExist turns S3's "no such key" into fs.ErrNotExist, the Store contract's answer.
func notExist(err error) error {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return nil
	}
	switch {
	case resp.Code == "NoSuchKey" || resp.Code == "NoSuchObject":
	case resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket":
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", fs.ErrNotExist, resp.Message)
}

// movedRegion reports an answer that names the bucket's real region, which minio-go has then
// cached: its own retry would have followed it at once.
func movedRegion(err error) bool {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) || resp.Region == "" {
		return false
	}
	switch resp.Code {
	case "AuthorizationHeaderMalformed", "InvalidRegion", "AccessDenied":
		return true
	}
	return false
}

// plain keeps minio-go's error type from leaking above this package: its code, message and
// HTTP status as text.
func plain(err error) error {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return err
	}
	msg := resp.Message
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	if resp.StatusCode == 0 {
		return fmt.Errorf("%s: %s", resp.Code, msg)
	}
	return fmt.Errorf("%s: %s (HTTP %d)", resp.Code, msg, resp.StatusCode)
}
