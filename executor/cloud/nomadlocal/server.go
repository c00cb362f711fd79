package nomadlocal

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/internal/safefile"
)

// Server is a one-server Nomad cluster started by StartServer, locked down (its Fleet): what
// the CLI runs when no NOMAD_ADDR is set, and what tests run their client agents against.
type Server struct {
	Addr string // https://HOST:PORT of its HTTP API
	RPC  string // HOST:PORT that client agents join
	Log  string // the file that holds its output
	// Adopted says the server was running already: an earlier driver's, which outlived it.
	Adopted bool
	Fleet   *Fleet
	pid     int
	cmd     *exec.Cmd // nil when adopted
}

// serverState is what a directory remembers of the server it ran (server.json): its address
// and ports, so that a server started again there is where the client agents that joined it
// look for it, and its PID, so that a server left running by a driver that died can be adopted
// and stopped.
type serverState struct {
	Addr  string `json:"addr,omitempty"` // empty: 127.0.0.1 (a directory of an earlier release)
	Ports [3]int `json:"ports"`          // http, rpc, serf
	PID   int    `json:"pid"`
}

// ServerOptions say how StartServer starts a server.
type ServerOptions struct {
	Bin string // the nomad binary
	// Dir holds its configuration (server.hcl, 0600: it holds the gossip key), output
	// (server.log), data (data/) and state (server.json).
	Dir string
	// Fleet is the cluster's security: its certificates, gossip key and management token.
	Fleet *Fleet
	// Addr is the address the server binds and advertises (default 127.0.0.1): one its client
	// agents can route to. A directory that ran a server before keeps its address.
	Addr     string
	FreePort func() (int, error)
}

// StartServer runs a one-server Nomad cluster, locked down: mutual TLS on HTTP and RPC with the
// fleet's certificates, its gossip encrypted, and ACLs bootstrapped with the fleet's management
// token. A directory that ran a server before gets it back: the running one when it still
// answers (its driver died, the server did not), else a new one on the same address and ports
// from the same data, so that the client agents and jobs of the earlier server carry on.
// Otherwise its ports come from FreePort. It returns once the server has elected itself leader,
// its ACLs are bootstrapped and it takes Variables (its keyring made), within two minutes; ctx
// bounds the wait, not the server's life, which ends with Stop.
func StartServer(ctx context.Context, o ServerOptions) (*Server, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	stateFile := filepath.Join(o.Dir, "server.json")
	var st serverState
	if b, err := os.ReadFile(stateFile); err == nil && json.Unmarshal(b, &st) == nil && st.Ports[0] > 0 {
		st.Addr = cmp.Or(st.Addr, "127.0.0.1")
		s := newServer(o, st)
		if alive(st.PID) && s.leader() {
			s.Adopted, s.pid = true, st.PID
			return s, s.bootstrapACL(ctx)
		}
		if !portsFree(st.Addr, st.Ports) {
			st = serverState{}
		}
	} else {
		st = serverState{}
	}
	fresh := st.Ports[0] == 0
	if fresh {
		st.Addr = cmp.Or(o.Addr, "127.0.0.1")
	}
	if err := o.Fleet.IssueServer(st.Addr); err != nil {
		return nil, err
	}
	// Fresh ports are free when picked, not when bound: another process (a parallel test's
	// server, a UDP socket on the serf port) may take one in between. An agent that exits on a
	// bind error is started again on other ports; a directory's remembered ports are not
	// changed, since its client agents look for the server there.
	for attempt := 1; ; attempt++ {
		if fresh {
			for i := range st.Ports {
				p, err := o.FreePort()
				if err != nil {
					return nil, fmt.Errorf("nomad server: %w", err)
				}
				st.Ports[i] = p
			}
		}
		s, err := startServerOn(ctx, o, st)
		var exited *agentExitedError
		if fresh && attempt < 3 && errors.As(err, &exited) && exited.portTaken() {
			continue
		}
		return s, err
	}
}

// agentExitedError says the agent exited before it became leader, with the end of its log.
type agentExitedError struct{ log, tail string }

func (e *agentExitedError) Error() string {
	return fmt.Sprintf("the local nomad server exited as it started (see %s): %s", e.log, e.tail)
}

func (e *agentExitedError) portTaken() bool {
	return strings.Contains(e.tail, "address already in use")
}

// startServerOn starts the agent on st's address and ports and waits, within two minutes (a
// loaded machine's start takes seconds, an idle one's under one), for it to lead and for its
// ACLs.
func startServerOn(ctx context.Context, o ServerOptions, st serverState) (*Server, error) {
	stateFile := filepath.Join(o.Dir, "server.json")
	conf := filepath.Join(o.Dir, "server.hcl")
	hcl := ServerAgent{DataDir: filepath.Join(o.Dir, "data"), Addr: st.Addr, Ports: st.Ports, TLS: o.Fleet.ServerTLS(), GossipKey: o.Fleet.GossipKey}.HCL()
	if err := safefile.Write(conf, []byte(hcl), 0o600); err != nil {
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	s := newServer(o, st)
	cmd, err := StartAgent(o.Bin, conf, s.Log)
	if err != nil {
		return nil, fmt.Errorf("start nomad server: %w", err)
	}
	s.cmd, s.pid = cmd, cmd.Process.Pid
	st.PID = s.pid
	if b, err := json.Marshal(st); err == nil {
		safefile.Write(stateFile, b, 0o600)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if s.leader() {
			if err := s.bootstrapACL(ctx); err != nil {
				s.Stop()
				return nil, err
			}
			if err := s.waitKeyring(ctx, deadline); err != nil {
				s.Stop()
				return nil, err
			}
			return s, nil
		}
		if !alive(s.pid) {
			s.Stop() // reaps it
			return nil, &agentExitedError{log: s.Log, tail: logTail(s.Log)}
		}
		if err := ctx.Err(); err != nil {
			s.Stop()
			return nil, fmt.Errorf("nomad server: %w", err)
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("the local nomad server did not start in 2 minutes (see %s): %s", s.Log, logTail(s.Log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTail is the last lines of an agent's log (at most 1 KiB), for an error that must say why
// without the reader opening a file that a test's cleanup may have removed.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 1024 {
		b = b[len(b)-1024:]
	}
	return strings.TrimSpace(string(b))
}

func newServer(o ServerOptions, st serverState) *Server {
	return &Server{Addr: "https://" + net.JoinHostPort(st.Addr, fmt.Sprint(st.Ports[0])), RPC: net.JoinHostPort(st.Addr, fmt.Sprint(st.Ports[1])),
		Log: filepath.Join(o.Dir, "server.log"), Fleet: o.Fleet}
}

// Client is an API client of the server with the fleet's management token.
func (s *Server) Client() (*nomad.Client, error) {
	c, err := nomad.NewClient(s.Fleet.APIConfig(s.Addr))
	if err != nil {
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	return c, nil
}

// leader says whether the server answers with a leader elected.
func (s *Server) leader() bool {
	c, err := s.Client()
	if err != nil {
		return false
	}
	defer c.Close()
	leader, err := c.Status().Leader()
	return err == nil && leader != ""
}

// bootstrapACL makes the fleet's management token the cluster's: Nomad takes a bootstrap token
// of the caller's choosing, so the token is in the fleet's directory before the cluster knows
// it, and a driver that died between the two finds it there. A cluster bootstrapped before (a
// server adopted or restarted) must then accept that token.
func (s *Server) bootstrapACL(ctx context.Context) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	w := (&nomad.WriteOptions{}).WithContext(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, _, err := c.ACLTokens().BootstrapOpts(s.Fleet.Token, w)
		if err == nil {
			return nil
		}
		if strings.Contains(err.Error(), "already done") {
			if _, _, err := c.ACLTokens().Self((&nomad.QueryOptions{}).WithContext(ctx)); err != nil {
				return fmt.Errorf("nomad server: ACLs were bootstrapped with another token than the fleet's in %s: %w", s.Fleet.Dir, err)
			}
			return nil
		}
		// Right after its election a server may not yet take writes.
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("nomad server: ACL bootstrap: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// keyringProbe is the Variable waitKeyring writes and deletes.
const keyringProbe = "rubberband/keyring-ready"

// waitKeyring waits, until deadline, for the new server to take Variables: its leader makes the
// keyring's first key after its election, and until then a Variable's write fails ("keyring has
// not been initialized yet"), which is how a gang's secrets reach its job. On a loaded machine
// that took long enough for every launch of a run's first stage to spend its tries on it.
func (s *Server) waitKeyring(ctx context.Context, deadline time.Time) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	w := (&nomad.WriteOptions{}).WithContext(ctx)
	for {
		_, _, err := c.Variables().Create(&nomad.Variable{Path: keyringProbe, Items: nomad.VariableItems{"ready": "1"}}, w)
		if err == nil {
			if _, err := c.Variables().Delete(keyringProbe, w); err != nil {
				return fmt.Errorf("nomad server: delete %s: %w", keyringProbe, err)
			}
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("nomad server: its keyring never took a Variable (see %s): %w", s.Log, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive says whether process pid runs (a zombie does not: an adopted server's parent, the dead
// driver, is not there to reap it).
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func portsFree(addr string, ports [3]int) bool {
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(p)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// Stop stops the server: SIGTERM to its process group, SIGKILL after ten seconds; it returns once
// the server has exited.
func (s *Server) Stop() {
	syscall.Kill(-s.pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		if s.cmd != nil {
			s.cmd.Wait()
		} else { // adopted: not our child, so watch for it to go
			for alive(s.pid) {
				time.Sleep(50 * time.Millisecond)
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.pid, syscall.SIGKILL)
		<-done
	}
}

// StartAgent starts `bin agent -config conf` in a process group of its own (so that a stop
// reaches what it started), its output written to the file logFile. The caller waits for it.
func StartAgent(bin, conf, logFile string) (*exec.Cmd, error) {
	logf, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the agent holds its own descriptor
	cmd := exec.Command(bin, "agent", "-config", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// FreePort returns a loopback port nobody listens on now (for Config.FreePort and StartServer).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// OutboundAddr is the address this host sends from on its default route: the one machines of
// its network (EC2 instances in its VPC) reach it at. Nothing is sent: connecting a UDP socket
// only picks the route.
func OutboundAddr() (string, error) {
	c, err := net.Dial("udp4", "203.0.113.1:9") // TEST-NET-3: never local, so the default route
	if err != nil {
		return "", fmt.Errorf("no default route to find this host's outbound address: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}
