package servers

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
)

// Nomad is a real Nomad server for one test; clients join it as nodes.
type Nomad struct {
	Addr   string // http://127.0.0.1:PORT of the server's HTTP API
	RPC    string // 127.0.0.1:PORT that clients join
	Bin    string // the nomad binary
	dir    string
	t      testing.TB
	server *nomadlocal.Server
	agents map[string]*exec.Cmd
	Client *nomad.Client
}

// StartNomad starts a Nomad server in a temporary directory (nomadlocal.StartServer, as the CLI
// does).
func StartNomad(t testing.TB) *Nomad {
	t.Helper()
	n := &Nomad{Bin: Binary(t, "nomad", "RB_NOMAD_BIN"), t: t, agents: map[string]*exec.Cmd{}}
	dir, err := os.MkdirTemp("", "rb-nomad-")
	if err != nil {
		t.Fatal(err)
	}
	n.dir = dir
	t.Cleanup(n.Stop)
	server, err := nomadlocal.StartServer(context.Background(), n.Bin, filepath.Join(dir, "server"), nomadlocal.FreePort)
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "server", "server.log"))
		t.Fatalf("%v:\n%s", err, tail(b))
	}
	n.server, n.Addr, n.RPC = server, server.Addr, server.RPC
	if n.Client, err = nomad.NewClient(&nomad.Config{Address: n.Addr}); err != nil {
		t.Fatal(err)
	}
	return n
}

// AddClient starts a client agent named name with gpus GPUs in its meta, and waits until the
// server lists it as ready.
func (n *Nomad) AddClient(name string, gpus int) {
	n.t.Helper()
	n.start(name, nomadlocal.ClientConfig(name, filepath.Join(n.dir, name), n.RPC, FreePort(n.t), gpus))
	n.waitReady(name)
}

// TeamClient is a client agent as a team's own cluster has them: in a node pool and datacenter,
// of a node class, with meta of the team's choosing and none of rubberband's (no rb_node).
type TeamClient struct {
	Name, NodePool, Datacenter, Class string
	Meta                              map[string]string
}

// AddTeamClient starts a team's client agent, waits until the server lists it as ready, and
// returns its Nomad node ID.
func (n *Nomad) AddTeamClient(c TeamClient) string {
	n.t.Helper()
	meta := ""
	for k, v := range c.Meta {
		meta += fmt.Sprintf("    %q = %q\n", k, v)
	}
	cfg := fmt.Sprintf(`name = %q
data_dir = %q
bind_addr = "127.0.0.1"
datacenter = %q
log_level = "WARN"
ports { http = %d }
client {
  enabled = true
  servers = [%q]
  node_pool = %q
  node_class = %q
  meta {
%s  }
  options { "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean" }
}
advertise { http = "127.0.0.1"
  rpc = "127.0.0.1"
  serf = "127.0.0.1" }
plugin "raw_exec" { config { enabled = true } }
`, c.Name, filepath.Join(n.dir, c.Name), cmp.Or(c.Datacenter, "dc1"), FreePort(n.t), n.RPC, cmp.Or(c.NodePool, "default"), c.Class, meta)
	n.start(c.Name, cfg)
	return n.waitReady(c.Name)
}

// waitReady waits until the server lists the client agent named name as ready, and returns its
// node ID.
func (n *Nomad) waitReady(name string) string {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		nodes, _, err := n.Client.Nodes().List(nil)
		if err == nil {
			for _, node := range nodes {
				if node.Name == name && node.Status == "ready" {
					return node.ID
				}
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("nomad client %s never became ready:\n%s", name, n.log(name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running says whether the agent named name still runs (a process that exited, and is not yet
// reaped, does not).
func (n *Nomad) Running(name string) bool {
	cmd, ok := n.agents[name]
	if !ok || cmd.Process == nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return false
	}
	_, state, _ := strings.Cut(string(b), ") ")
	return state != "" && state[0] != 'Z' && state[0] != 'X'
}

func (n *Nomad) start(name, cfg string) {
	n.t.Helper()
	dir := filepath.Join(n.dir, name+"-conf")
	os.MkdirAll(dir, 0o755)
	file := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		n.t.Fatal(err)
	}
	cmd, err := nomadlocal.StartAgent(n.Bin, file, filepath.Join(dir, "agent.log"))
	if err != nil {
		n.t.Fatalf("start nomad %s: %v", name, err)
	}
	n.agents[name] = cmd
}

// log returns the end of an agent's output.
func (n *Nomad) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(n.dir, name+"-conf", "agent.log"))
	return tail(b)
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// KillClient stops a client agent abruptly, as a lost node.
func (n *Nomad) KillClient(name string) {
	if cmd, ok := n.agents[name]; ok {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		delete(n.agents, name)
	}
}

// Stop purges every job, stops the agents, unmounts what Nomad mounted under its data
// directories (as root it mounts tmpfs for task secrets) and removes them.
func (n *Nomad) Stop() {
	if n.Client != nil {
		if jobs, _, err := n.Client.Jobs().List(nil); err == nil {
			for _, j := range jobs {
				n.Client.Jobs().Deregister(j.ID, true, nil)
			}
		}
		n.Client.System().GarbageCollect()
	}
	for name, cmd := range n.agents {
		stopGroup(cmd, 10*time.Second)
		delete(n.agents, name)
	}
	if n.server != nil {
		n.server.Stop()
		n.server = nil
	}
	nomadlocal.UnmountUnder(n.dir)
	os.RemoveAll(n.dir)
	os.RemoveAll("/tmp/alloc_mounts")
}
