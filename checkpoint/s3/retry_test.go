package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

// slack is what an operation may take past its retry window: its last attempt, here a
// refused connection on loopback, and a loaded machine's scheduling.
const slack = 750 * time.Millisecond

// fakeCreds keeps the credential chain from asking an instance metadata service that is not
// there, for tests that start no MinIO (which sets them).
func fakeCreds(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "rubberband")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "rubberband-secret-key")
}

// A closed port fails within the retry window plus one attempt, saying how many attempts it
// made: minio-go's own retries no longer run inside the store's.
func TestDeadEndpointFailsWithinBound(t *testing.T) {
	fakeCreds(t)
	endpoint := fmt.Sprintf("127.0.0.1:%d", servers.FreePort(t))
	const window = time.Second
	start := time.Now()
	_, err := New(context.Background(), Config{Endpoint: endpoint, Bucket: "checkpoints", Insecure: true, RetryFor: window})
	took := time.Since(start)
	var re *RetryError
	if !errors.As(err, &re) || !re.Transient || re.Attempts < 3 {
		t.Fatalf("want a transient RetryError after several attempts, got %v", err)
	}
	if took < window || took > window+slack {
		t.Errorf("failed after %v, want %v to %v", took, window, window+slack)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("gave up after %d attempts in", re.Attempts)) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("message: %v", err)
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}

// A server that goes away after the store connected: a Put fails within the window, as New does.
func TestServerGoneFailsWithinBound(t *testing.T) {
	m := servers.StartMinIO(t)
	const window = time.Second
	s, err := New(context.Background(), Config{Endpoint: m.Endpoint, Bucket: "checkpoints", Insecure: true, TempDir: t.TempDir(), RetryFor: window})
	if err != nil {
		t.Fatal(err)
	}
	m.Kill()
	start := time.Now()
	_, err = s.Put(context.Background(), "trials/t1/1", strings.NewReader("weights"))
	took := time.Since(start)
	var re *RetryError
	if !errors.As(err, &re) || !re.Transient || took < window || took > window+slack {
		t.Fatalf("put: %v after %v, want a transient RetryError after %v to %v", err, took, window, window+slack)
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}

// A bucket name minio-go refuses before sending anything is not retried, whatever the window.
func TestBadBucketFailsAtOnce(t *testing.T) {
	m := servers.StartMinIO(t)
	for _, bucket := range []string{"ab", "Upper_Case", "192.168.1.1"} {
		start := time.Now()
		_, err := New(context.Background(), Config{Endpoint: m.Endpoint, Bucket: bucket, Insecure: true})
		took := time.Since(start)
		var re *RetryError
		if !errors.As(err, &re) || re.Transient || re.Attempts != 1 || took > time.Second {
			t.Errorf("bucket %q: %v after %v, want one attempt in under 1 s", bucket, err, took)
		}
		if !strings.Contains(err.Error(), "(not retried)") {
			t.Errorf("bucket %q: message %v", bucket, err)
		}
		t.Logf("%v after %v", err, took.Round(time.Millisecond))
	}
}

// A canceled context ends the retries at once, and the error says so.
func TestCancelStopsRetrying(t *testing.T) {
	fakeCreds(t)
	endpoint := fmt.Sprintf("127.0.0.1:%d", servers.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := New(ctx, Config{Endpoint: endpoint, Bucket: "checkpoints", Insecure: true})
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 300*time.Millisecond+slack {
		t.Fatalf("%v after %v", err, took)
	}
}

// flaky stands between the store and MinIO: it answers the next fail PUT requests with status
// and an S3 error body, then forwards again.
type flaky struct {
	mu     sync.Mutex
	fail   int
	status int
	puts   int
	proxy  *httputil.ReverseProxy
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	inject := false
	if r.Method == http.MethodPut {
		f.puts++
		if f.fail > 0 {
			f.fail--
			inject = true
		}
	}
	status := f.status
	f.mu.Unlock()
	if !inject {
		f.proxy.ServeHTTP(w, r) // the Host header stays the proxy's, which the request was signed for
		return
	}
	codes := map[int]string{400: "InvalidRequest", 403: "AccessDenied", 408: "RequestTimeout", 429: "SlowDown", 500: "InternalError", 503: "ServiceUnavailable"}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected %d</Message></Error>`, codes[status], status)
}

func (f *flaky) arm(n, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.status, f.puts = n, status, 0
}

// Transient answers (5xx, 408, 429) are retried until the server answers; a refusal (400, 403)
// is one attempt.
func TestTransientAnswersRetried(t *testing.T) {
	m := servers.StartMinIO(t)
	target, err := url.Parse("http://" + m.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{proxy: httputil.NewSingleHostReverseProxy(target)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s, err := New(context.Background(), Config{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "checkpoints", Insecure: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		status, fail int
		ok           bool
		puts         int
	}{
		{503, 2, true, 3},
		{500, 2, true, 3},
		{429, 2, true, 3},
		{408, 1, true, 2},
		{403, 1, false, 1},
		{400, 1, false, 1},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			f.arm(tc.fail, tc.status)
			key := fmt.Sprintf("trials/t%d/1", tc.status)
			start := time.Now()
			_, err := s.Put(context.Background(), key, bytes.NewReader([]byte("weights")))
			took := time.Since(start)
			f.mu.Lock()
			puts := f.puts
			f.mu.Unlock()
			if (err == nil) != tc.ok || puts != tc.puts || took > 2*time.Second {
				t.Fatalf("put: %v after %v and %d PUTs; want ok=%v after %d", err, took, puts, tc.ok, tc.puts)
			}
			if tc.ok {
				if got := read(t, s, key); string(got) != "weights" {
					t.Fatalf("read back %q", got)
				}
				return
			}
			var re *RetryError
			if !errors.As(err, &re) || re.Transient || re.Attempts != 1 || !strings.Contains(err.Error(), fmt.Sprintf("(HTTP %d)", tc.status)) {
				t.Fatalf("want one attempt, not transient, naming the status: %v", err)
			}
		})
	}
	// A server that keeps answering 503 is given up on when the window closes.
	s.cfg.RetryFor = 500 * time.Millisecond
	f.arm(1000, 503)
	start := time.Now()
	_, err = s.Put(context.Background(), "trials/t/2", bytes.NewReader([]byte("x")))
	var re *RetryError
	if took := time.Since(start); !errors.As(err, &re) || !re.Transient || took > 500*time.Millisecond+slack {
		t.Fatalf("%v after %v", err, took)
	}
}

func read(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	rc, _, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The wait after attempt n is drawn from [0, min(max, base·2^(n-1))), and never overflows.
func TestBackoffFullJitter(t *testing.T) {
	top := func(k int64) int64 { return k - 1 }
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{1, 100*time.Millisecond - 1}, {2, 200*time.Millisecond - 1}, {6, 3200*time.Millisecond - 1},
		{7, 5*time.Second - 1}, {60, 5*time.Second - 1}, {1000, 5*time.Second - 1},
	} {
		if got := backoff(tc.n, DefaultBackoff, DefaultMaxBackoff, top); got != tc.want {
			t.Errorf("attempt %d: longest wait %v, want %v", tc.n, got, tc.want)
		}
		if got := backoff(tc.n, DefaultBackoff, DefaultMaxBackoff, func(int64) int64 { return 0 }); got != 0 {
			t.Errorf("attempt %d: shortest wait %v", tc.n, got)
		}
	}
}

// What is and is not worth retrying, by the errors minio-go and net/http return.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("Bucket name cannot be shorter than 3 characters"), false},
		{&url.Error{Op: "Get", URL: "http://x", Err: errors.New("dial tcp: connection refused")}, true},
		{fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{&url.Error{Op: "Get", URL: "http://x", Err: &net.DNSError{Err: "no such host", Name: "typo.example", IsNotFound: true}}, false},
		{&url.Error{Op: "Get", URL: "http://x", Err: &net.DNSError{Err: "server misbehaving", Name: "s3.example", IsTemporary: true}}, true},
		{&url.Error{Op: "Get", URL: "https://x", Err: errors.New("http: server gave HTTP response to HTTPS client")}, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%v: transient %v, want %v", tc.err, got, tc.want)
		}
	}
}
