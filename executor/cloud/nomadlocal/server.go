package nomadlocal

import (
	"context"
	"encoding/json"
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

// Server is a one-server Nomad cluster on loopback, started by StartServer: what the CLI runs
// when no NOMAD_ADDR is set, and what tests run their client agents against.
type Server struct {
	Addr string // http://127.0.0.1:PORT of its HTTP API
	RPC  string // 127.0.0.1:PORT that client agents join
	Log  string // the file that holds its output
	// Adopted says the server was running already: an earlier driver's, which outlived it.
	Adopted bool
	pid     int
	cmd     *exec.Cmd // nil when adopted
}

// serverState is what a directory remembers of the server it ran (server.json): its ports, so
// that a server started again there is where the client agents that joined it look for it, and
// its PID, so that a server left running by a driver that died can be adopted and stopped.
type serverState struct {
	Ports [3]int `json:"ports"` // http, rpc, serf
	PID   int    `json:"pid"`
}

// StartServer runs a one-server Nomad cluster on loopback with the nomad binary bin: its
// configuration (server.hcl), output (server.log), data (data/) and state (server.json) in dir.
// A directory that ran a server before gets it back: the running one when it still answers (its
// driver died, the server did not), else a new one on the same ports from the same data, so that
// the client agents and jobs of the earlier server carry on. Otherwise its ports come from
// freePort. It returns once the server has elected itself leader, within a minute; ctx bounds
// the wait, not the server's life, which ends with Stop.
func StartServer(ctx context.Context, bin, dir string, freePort func() (int, error)) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	stateFile := filepath.Join(dir, "server.json")
	var st serverState
	if b, err := os.ReadFile(stateFile); err == nil && json.Unmarshal(b, &st) == nil && st.Ports[0] > 0 {
		s := newServer(dir, st.Ports)
		if alive(st.PID) && s.leader() {
			s.Adopted, s.pid = true, st.PID
			return s, nil
		}
		if !portsFree(st.Ports) {
			st = serverState{}
		}
	} else {
		st = serverState{}
	}
	if st.Ports[0] == 0 {
		for i := range st.Ports {
			p, err := freePort()
			if err != nil {
				return nil, fmt.Errorf("nomad server: %w", err)
			}
			st.Ports[i] = p
		}
	}
	conf := filepath.Join(dir, "server.hcl")
	if err := os.WriteFile(conf, []byte(ServerConfig(filepath.Join(dir, "data"), st.Ports[0], st.Ports[1], st.Ports[2])), 0o644); err != nil {
		return nil, fmt.Errorf("nomad server: %w", err)
	}
	s := newServer(dir, st.Ports)
	cmd, err := StartAgent(bin, conf, s.Log)
	if err != nil {
		return nil, fmt.Errorf("start nomad server: %w", err)
	}
	s.cmd, s.pid = cmd, cmd.Process.Pid
	st.PID = s.pid
	if b, err := json.Marshal(st); err == nil {
		safefile.Write(stateFile, b, 0o600)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		if s.leader() {
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

func newServer(dir string, ports [3]int) *Server {
	return &Server{Addr: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), RPC: fmt.Sprintf("127.0.0.1:%d", ports[1]), Log: filepath.Join(dir, "server.log")}
}

// leader says whether the server answers with a leader elected.
func (s *Server) leader() bool {
	c, err := nomad.NewClient(&nomad.Config{Address: s.Addr})
	if err != nil {
		return false
	}
	leader, err := c.Status().Leader()
	return err == nil && leader != ""
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

func portsFree(ports [3]int) bool {
	for _, p := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
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
