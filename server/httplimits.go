package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rubberband-hpo/rubberband/spec"
)

// HTTPLimits bound what one client may hold of the server before it has authenticated: a
// connection that sends its headers or its body slowly, or many connections from one address,
// would otherwise hold file descriptors and goroutines for ever (slowloris).
type HTTPLimits struct {
	// ReadHeaderTimeout bounds how long a request's headers may take to arrive
	// (DefaultReadHeaderTimeout if 0).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds how long a request's body may take to arrive, from the end of its
	// headers (DefaultBodyTimeout if 0). It is a deadline on the body, not on the request: a
	// long planning or an event stream is not cut by it.
	BodyTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its next request
	// (DefaultIdleTimeout if 0).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (DefaultMaxHeaderBytes if 0).
	MaxHeaderBytes int
	// MaxConnsPerIP bounds the connections one remote address holds open at once
	// (DefaultMaxConnsPerIP if 0; negative: no bound). One over it is closed as it is accepted,
	// before a byte is read. Behind a reverse proxy the proxy is the one address.
	MaxConnsPerIP int
	// MaxConns bounds the connections open at once from all addresses (DefaultMaxConns if 0;
	// negative: no bound), so that many addresses together cannot take every file descriptor.
	MaxConns int
}

// Defaults of HTTPLimits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnsPerIP     = 128
	DefaultMaxConns          = 4096
)

func (l HTTPLimits) withDefaults() HTTPLimits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConnsPerIP == 0 {
		l.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if l.MaxConns == 0 {
		l.MaxConns = DefaultMaxConns
	}
	return l
}

// HTTPServer is the http.Server that serves h within l; base is every request's parent context.
// Serve it on Listen's listener, so that the per-address bound holds too.
func (l HTTPLimits) HTTPServer(base context.Context, h http.Handler) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           bodyDeadline(h, l.BodyTimeout),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
}

// Listen wraps ln so that no remote address holds more than MaxConnsPerIP of its connections,
// and all together no more than MaxConns.
func (l HTTPLimits) Listen(ln net.Listener) net.Listener {
	l = l.withDefaults()
	if l.MaxConnsPerIP < 0 && l.MaxConns < 0 {
		return ln
	}
	return &perIPListener{Listener: ln, max: l.MaxConnsPerIP, maxAll: l.MaxConns, open: map[string]int{}}
}

// perIPListener closes, as it accepts it, a connection whose remote address already holds max,
// or one over maxAll in all (a negative bound: none).
type perIPListener struct {
	net.Listener
	max, maxAll int

	mu   sync.Mutex
	open map[string]int
	all  int
}

var _ net.Listener = (*perIPListener)(nil)

func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		l.mu.Lock()
		full := (l.max >= 0 && l.open[ip] >= l.max) || (l.maxAll >= 0 && l.all >= l.maxAll)
		if !full {
			l.open[ip]++
			l.all++
		}
		l.mu.Unlock()
		if full {
			c.Close() // before a byte is read: it costs nothing but the accept
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *perIPListener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// countedConn gives its slot back once, at its first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func remoteIP(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// bodyDeadline gives a request with a body timeout to send it, as a read deadline on its
// connection that is lifted once the body has been read whole. The server's own ReadTimeout
// would not do: it stays on the connection while the handler runs, and the server cancels the
// request's context when it passes (an event stream, a long planning). A body the handler does
// not read (a request refused before it) is discarded by net/http under the same deadline.
func bodyDeadline(h http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err == nil {
			r.Body = &liftOnEOF{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// liftOnEOF calls lift once its body has been read to its end.
type liftOnEOF struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *liftOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

// Defaults of the stream bounds (Config.MaxStreams, Config.MaxStreamsPerUser).
const (
	DefaultMaxStreams        = 256
	DefaultMaxStreamsPerUser = 16
)

// openStream takes one of the streams the server holds open at once (Config.MaxStreams), and one
// of user's (Config.MaxStreamsPerUser), so that no user takes every slot; it answers 429 when
// either is full. closeStream gives them back.
func (s *Server) openStream(w http.ResponseWriter, user string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var why string
	switch {
	case s.streamsBy[user] >= s.cfg.MaxStreamsPerUser:
		why = fmt.Sprintf("too many streams: %s holds %d open, the most one user may (close one, or try again later)", user, s.streamsBy[user])
	case s.streamsOpen >= s.cfg.MaxStreams:
		why = fmt.Sprintf("too many streams: the server holds %d open, the most it serves (try again later)", s.streamsOpen)
	default:
		s.streamsBy[user]++
		s.streamsOpen++
		return true
	}
	w.Header().Set("Retry-After", "10")
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": why})
	return false
}

func (s *Server) closeStream(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamsOpen--
	if s.streamsBy[user]--; s.streamsBy[user] <= 0 {
		delete(s.streamsBy, user)
	}
}

// Bounds on an error answer: a spec's problems may each quote what was sent (a field's name, a
// value), and a spec may have thousands, so an answer built from them could be many times its
// request (a 322 KB submission once drew 302 MB).
const (
	MaxProblems     = 100     // problems listed in one answer; the rest are counted
	MaxProblemBytes = 1 << 10 // of one problem's text
	MaxErrorBytes   = 8 << 10 // of an error's message
	truncatedMarker = "… (cut)"
)

// problemsError is the InputError of a spec's problems, within MaxProblems of MaxProblemBytes.
func problemsError(file string, probs spec.Problems) *InputError {
	ie := &InputError{Err: fmt.Errorf("%s: %d problems", boundText(file, MaxProblemBytes), len(probs))}
	for i, p := range probs {
		if i == MaxProblems {
			ie.Problems = append(ie.Problems, fmt.Sprintf("… and %d more problems", len(probs)-MaxProblems))
			break
		}
		ie.Problems = append(ie.Problems, boundText(p.String(), MaxProblemBytes))
	}
	return ie
}

// boundText is s cut to at most max bytes (at a rune's start), marked as cut.
func boundText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(truncatedMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMarker
}
