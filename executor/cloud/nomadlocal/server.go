package nomadlocal

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	nomad "github.com/hashicorp/nomad/api"
)

// Server is a one-server Nomad cluster on loopback, started by StartServer: what the CLI runs
// when no NOMAD_ADDR is set, and what tests run their client agents against.
type Server struct {
	Addr string // http://127.0.0.1:PORT of its HTTP API
	RPC  string // 127.0.0.1:PORT that client agents join
	Log  string // the file that holds its output
	cmd  *exec.Cmd
}

// StartServer runs a one-server Nomad cluster on loopback with the nomad binary bin: its
// configuration (server.hcl), output (server.log) and data (data/) in dir, its ports from
// freePort. It returns once the server has elected itself leader, within a minute; ctx bounds
// the wait, not the server's life, which ends with Stop.
func StartServer(ctx context.Context, bin, dir string, freePort func() (int, error)) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	var ports [3]int // http, rpc, serf
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("nomad server: %w", err)
		}
		ports[i] = p
	}
	conf := filepath.Join(dir, "server.hcl")
	if err := os.WriteFile(conf, []byte(ServerConfig(filepath.Join(dir, "data"), ports[0], ports[1], ports[2])), 0o644); err != nil {
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	s := &Server{Addr: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), RPC: fmt.Sprintf("127.0.0.1:%d", ports[1]), Log: filepath.Join(dir, "server.log")}
	cmd, err := StartAgent(bin, conf, s.Log)
	if err != nil {
		return nil, fmt.Errorf("start nomad server: %w", err)
	}
	s.cmd = cmd
	c, err := nomad.NewClient(&nomad.Config{Address: s.Addr})
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		if leader, err := c.Status().Leader(); err == nil && leader != "" {
			return s, nil
		}
		if err := ctx.Err(); err != nil {
			s.Stop()
			return nil, fmt.Errorf("nomad server: %w", err)
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("the local nomad server did not start (see %s)", s.Log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the server: SIGTERM to its process group, SIGKILL after ten seconds; it returns once
// the server has exited.
func (s *Server) Stop() {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
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
