package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	rbclock "github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/spec"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config is what the dashboard serves and what it may do.
type Config struct {
	Root string // the folder that holds the runs, as `rubberband list` reads it
	// Token, when set, is required on every request (as ?token= once, then a cookie, or as a
	// bearer token). The caller sets one for any address but loopback.
	Token string
	// AllowCancel shows a cancel button on live runs, which does what `rubberband cancel` does:
	// Cancel, which the caller gives (driver.Cancel: the dashboard reads runs, it drives none).
	AllowCancel bool
	Cancel      func(ctx context.Context, dir string) error
	Log         io.Writer
	// PlanTimeout bounds the planning one plan page starts (the plan and its deadline sweep);
	// DefaultPlanTimeout if 0. Its samples are bounded too (MaxPageSamples).
	PlanTimeout time.Duration
	// MaxStreams bounds the live pages open at once (Server-Sent Event streams); 64 if 0.
	MaxStreams int
	// MaxStreamsPerClient bounds the live pages one client (one remote IP address) may hold
	// open, so that no client takes every stream; DefaultMaxStreamsPerClient if 0. Behind a
	// proxy, the proxy is the one client.
	MaxStreamsPerClient int
	// Poll is how often a watched journal is checked for appended records; 50ms if 0.
	Poll time.Duration
	// Hosts are host names (lower case, no port) the dashboard answers to without a Token
	// besides loopback ones: those of a caller that authenticates every request itself (the
	// team server's --public-url). Any other name is refused (DNS rebinding).
	Hosts []string
	// Clock is the time a live run's page is drawn at (its elapsed time and cost so far); the
	// wall clock if nil.
	Clock rbclock.Clock
}

// Limits on what a browser may make the server do.
const (
	MaxPastedSpec              = 64 << 10 // bytes of a pasted spec
	MaxLogLines                = 1000     // lines of a trial log's tail
	MaxLogBytes                = 256 << 10
	MaxPageSamples             = 2000 // samples of the plan a page starts, whatever its spec asks
	DefaultPlanTimeout         = 30 * time.Second
	DefaultMaxStreamsPerClient = 8
)

// Server is the dashboard's HTTP handler.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	tmpl    *template.Template
	key     []byte // signs CSRF tokens
	streams chan struct{}
	plans   chan struct{} // one planning at a time: it takes every core
	ctx     context.Context
	stop    context.CancelFunc
	// planSpec and cancelRun plan and cancel as `rubberband plan` and `cancel` do
	// (planner.PlanSpec, Config.Cancel); the tests watch what they are asked.
	planSpec  func(ctx context.Context, exp *spec.Experiment) (*planner.Report, error)
	cancelRun func(ctx context.Context, dir string) error

	mu        sync.Mutex
	hubs      map[string]*hub // by state directory
	runs      *runsHub
	perClient map[string]int // live streams by client address
}

var _ http.Handler = (*Server)(nil)

// New builds the dashboard; Close stops what it follows.
func New(cfg Config) (*Server, error) {
	if cfg.AllowCancel && cfg.Cancel == nil {
		return nil, errors.New("ui: AllowCancel needs Config.Cancel")
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 64
	}
	if cfg.MaxStreamsPerClient <= 0 {
		cfg.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if cfg.PlanTimeout <= 0 {
		cfg.PlanTimeout = DefaultPlanTimeout
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	cfg.Clock = rbclock.Or(cfg.Clock)
	tmpl, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: parse templates: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, tmpl: tmpl, key: key, streams: make(chan struct{}, cfg.MaxStreams), plans: make(chan struct{}, 1),
		ctx: ctx, stop: stop, hubs: map[string]*hub{}, perClient: map[string]int{}, planSpec: planSpec, cancelRun: cfg.Cancel}
	s.runs = newRunsHub(s)
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.runsPage)
	mux.HandleFunc("GET /events", s.runsEvents)
	mux.HandleFunc("GET /runs/{run}", s.runPage)
	mux.HandleFunc("GET /runs/{run}/events", s.runEvents)
	mux.HandleFunc("GET /runs/{run}/trials/{trial}/log", s.trialLog)
	mux.HandleFunc("POST /runs/{run}/cancel", s.cancel)
	mux.HandleFunc("GET /plan", s.planPage)
	mux.HandleFunc("POST /plan", s.planPasted)
	s.mux = mux
	return s, nil
}

// Close stops following journals and ends the live pages' streams.
func (s *Server) Close() { s.stop() }

// NewToken makes a random token for a dashboard bound beyond loopback.
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Loopback says whether a listener's address is reachable from this machine only.
func Loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

const tokenCookie = "rb_token"

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// The pages load nothing from elsewhere and run only the embedded script.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer") // a ?token= must not leak through links
	h.Set("X-Frame-Options", "DENY")
	if s.cfg.Token == "" {
		// Loopback without a token: refuse other host names, so that a web page cannot reach
		// the dashboard through a name it re-points at 127.0.0.1 (DNS rebinding).
		if !loopbackHost(r.Host) && !s.namedHost(r.Host) {
			http.Error(w, "this dashboard answers to localhost only (and the host names its server is given)", http.StatusForbidden)
			return
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	if q := r.URL.Query().Get("token"); q != "" && s.tokenOK(q) {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, withoutToken(r.URL), http.StatusSeeOther) // the token leaves the address bar
		return
	}
	tok := ""
	if c, err := r.Cookie(tokenCookie); err == nil {
		tok = c.Value
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		tok = b
	}
	if !s.tokenOK(tok) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rubberband"`)
		http.Error(w, "a token is required: open the address `rubberband ui` printed (it ends in ?token=...)", http.StatusUnauthorized)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// withoutToken is the address u names on this site, without its token: a path with one leading
// slash, so that no "//host" or "/\\host" path sends the browser to another site.
func withoutToken(u *url.URL) string {
	v := u.Query()
	v.Del("token")
	loc := "/" + strings.TrimLeft(u.EscapedPath(), "/\\")
	if q := v.Encode(); q != "" {
		loc += "?" + q
	}
	return loc
}

func (s *Server) tokenOK(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// namedHost says whether hostport names one of Config.Hosts.
func (s *Server) namedHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	for _, h := range s.cfg.Hosts {
		if h == host {
			return true
		}
	}
	return false
}

// csrf is the form token of an action on a run: it proves the form came from this server.
func (s *Server) csrf(action, run string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(action + "\x00" + run))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin refuses a request from another site where the browser says where it came from.
// Sec-Fetch-Site, where sent, decides (none: typed or bookmarked): under the pages'
// Referrer-Policy, no-referrer, a browser sends no Referer and "Origin: null" with the
// dashboard's own forms. A browser without it is judged by Origin and Referer.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	for _, h := range []string{"Origin", "Referer"} {
		if o := r.Header.Get(h); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host != r.Host {
				return false
			}
		}
	}
	return true
}

// runDir finds the state directory of the run a path names: only a run directly under the root,
// so that no path leaves it.
func (s *Server) runDir(name string) (string, bool) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", false
	}
	dir := filepath.Join(s.cfg.Root, name)
	for _, d := range runDirsUnder(s.cfg.Root) {
		if d == dir {
			return dir, true
		}
	}
	return "", false
}

func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var buf strings.Builder
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		fmt.Fprintf(s.cfg.Log, "ui: render %s: %v\n", name, err)
		http.Error(w, "render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, buf.String())
}

// fail shows an error page; msg is escaped like everything else.
func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	s.render(w, status, "error.html", map[string]any{"Title": http.StatusText(status), "Message": msg})
}

func subtleEq(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
