package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

// Server is a fake EC2 (with Pricing and Service Quotas) on a loopback port. Its methods are
// safe for concurrent use.
type Server struct {
	cfg    Config
	types  map[string]InstanceType
	zones  []string // sorted, from the subnets
	url    string
	http   *http.Server
	ownDir bool
	start  time.Time
	wg     sync.WaitGroup // instance lifecycles, IMDS servers and the serve loop

	mu            sync.Mutex
	closed        bool
	instances     map[string]*instance
	order         []*instance // in launch order, for pagination
	seq           int
	tokens        map[string]*reservation // ClientToken -> the reservation it made
	volumes       map[string]*instance    // root volume id -> its instance
	spotHistory   []spotPrice
	quotas        map[string]float64
	capacity      []capacityFault
	throttle      int
	neverBoot     int
	stalls        []time.Duration // answers of RunInstances to hold, in order
	denied        map[string]bool
	groups        map[string]*group // security groups by ID
	groupOrder    []*group          // in creation order, for pagination
	groupSeq      int
	deletedGroups map[string]bool
	calls         []Call
	changed       chan struct{} // closed and replaced on every instance state change
	stopWatching  func() bool
}

var _ http.Handler = (*Server)(nil)

// Start serves a fake EC2 on a free loopback port until Close, or until ctx is done.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:           cfg,
		types:         map[string]InstanceType{},
		start:         time.Now().UTC(),
		instances:     map[string]*instance{},
		tokens:        map[string]*reservation{},
		volumes:       map[string]*instance{},
		quotas:        cfg.Quotas,
		denied:        map[string]bool{},
		groups:        map[string]*group{},
		deletedGroups: map[string]bool{},
		changed:       make(chan struct{}),
	}
	for _, t := range cfg.InstanceTypes {
		s.types[t.Name] = t
	}
	seen := map[string]bool{}
	for _, az := range cfg.Subnets {
		if !seen[az] {
			seen[az] = true
			s.zones = append(s.zones, az)
		}
	}
	sort.Strings(s.zones)
	s.seedSpotHistory()
	if cfg.Dir == "" {
		if s.cfg.Dir, err = os.MkdirTemp("", "ec2sim-"); err != nil {
			return nil, fmt.Errorf("ec2sim: instance directory: %w", err)
		}
		s.ownDir = true
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("ec2sim: instance directory: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("ec2sim: listen: %w", err)
	}
	s.url = "http://" + ln.Addr().String()
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.http.Serve(ln) // returns when Close shuts it down
	}()
	// A test's context ends before its cleanups run: closing then kills the instances' processes
	// even when the test forgot Close.
	s.mu.Lock()
	s.stopWatching = context.AfterFunc(ctx, func() { _ = s.Close() })
	s.mu.Unlock()
	return s, nil
}

// URL is the endpoint of all three services, such as http://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// EndpointEnv is the environment that points the AWS SDK's EC2, Pricing and Service Quotas
// clients at the fake (the SDK's service-specific endpoint variables).
func (s *Server) EndpointEnv() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL_EC2":            s.url,
		"AWS_ENDPOINT_URL_PRICING":        s.url,
		"AWS_ENDPOINT_URL_SERVICE_QUOTAS": s.url,
	}
}

// ClientEnv is the whole environment a driver process needs to use the fake through the SDK's
// default configuration: EndpointEnv, test credentials, the region, and
// AWS_EC2_METADATA_DISABLED=true so that the driver itself never looks for an IMDS. A test
// sets it with t.Setenv, or appends it to a child process's environment.
func (s *Server) ClientEnv() map[string]string {
	env := s.EndpointEnv()
	env["AWS_ACCESS_KEY_ID"] = "AKIDEC2SIMTEST"
	env["AWS_SECRET_ACCESS_KEY"] = "ec2sim-secret"
	env["AWS_REGION"] = s.cfg.Region
	env["AWS_EC2_METADATA_DISABLED"] = "true"
	return env
}

// Dir is the directory that holds the instances' directories.
func (s *Server) Dir() string { return s.cfg.Dir }

// Close terminates every instance, waits until their processes are gone (each gets KillGrace
// after SIGTERM), and stops serving. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, in := range s.order {
		s.haltLocked(in, haltClose)
	}
	stop := s.stopWatching
	s.mu.Unlock()
	stop()
	// Requests in flight get a while to finish; past that (a loaded machine, a client that keeps
	// a request open) their connections are cut: the instances are gone already, which is what
	// Close promises.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.http.Close()
	}
	s.wg.Wait()
	s.removeDir()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("ec2sim: close: %w", err)
	}
	return nil
}

func (s *Server) removeDir() {
	if s.ownDir {
		_ = os.RemoveAll(s.cfg.Dir)
	}
}

// ServeHTTP dispatches by protocol: the JSON services name their operation in X-Amz-Target,
// EC2's Query protocol in the form's Action.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Amz-Target") != "" {
		s.serveJSON(w, r)
		return
	}
	s.serveQuery(w, r)
}

// notifyLocked wakes the waiters of WaitState.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
