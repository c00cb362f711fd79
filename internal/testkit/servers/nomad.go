package servers

import (
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

// Nomad is a real Nomad server for one test, locked down as every fleet rubberband starts (mutual
// TLS, ACLs, encrypted gossip: nomadlocal.Fleet); clients join it as nodes.
type Nomad struct {
	Addr   string // https://127.0.0.1:PORT of the server's HTTP API
	RPC    string // 127.0.0.1:PORT that clients join
	Bin    string // the nomad binary
	Fleet  *nomadlocal.Fleet
	dir    string
	t      testing.TB
	server *nomadlocal.Server
	agents map[string]*exec.Cmd
	// Client is an API client with the management token.
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
	// Passable by other users, as a client's data_dir usually is: a server deployed as a job on
	// the local backend runs its sandboxed trainers as uids of their own, inside its allocation.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	n.dir = dir
	t.Cleanup(n.Stop)
	if n.Fleet, err = nomadlocal.OpenFleet(filepath.Join(dir, "fleet")); err != nil {
		t.Fatal(err)
	}
	server, err := nomadlocal.StartServer(context.Background(), nomadlocal.ServerOptions{Bin: n.Bin, Dir: filepath.Join(dir, "server"),
		Fleet: n.Fleet, FreePort: nomadlocal.FreePort})
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "server", "server.log"))
		t.Fatalf("%v:\n%s", err, tail(b))
	}
	n.server, n.Addr, n.RPC = server, server.Addr, server.RPC
	if n.Client, err = server.Client(); err != nil {
		t.Fatal(err)
	}
	return n
}

// Env is the nomad CLI's environment (NOMAD_ADDR, the TLS files, NOMAD_TOKEN) for this server,
// with token, or the management token when token is empty.
func (n *Nomad) Env(token string) []string { return n.Fleet.Env(n.Addr, token) }

// Token makes an ACL policy of the rules in policy (HCL) and a client token that holds only
// it, and returns the token's secret.
func (n *Nomad) Token(name, policy string) string {
	n.t.Helper()
	if _, err := n.Client.ACLPolicies().Upsert(&nomad.ACLPolicy{Name: name, Rules: policy}, nil); err != nil {
		n.t.Fatalf("ACL policy %s: %v", name, err)
	}
	tok, _, err := n.Client.ACLTokens().Create(&nomad.ACLToken{Name: name, Type: "client", Policies: []string{name}}, nil)
	if err != nil {
		n.t.Fatalf("ACL token %s: %v", name, err)
	}
	return tok.SecretID
}

// AddClient starts a client agent named name with gpus GPUs in its meta and raw_exec, and waits
// until the server lists it as ready.
func (n *Nomad) AddClient(name string, gpus int) {
	n.t.Helper()
	agent := nomadlocal.RubberbandNode(name, "127.0.0.1", filepath.Join(n.dir, name), n.RPC, FreePort(n.t), gpus, nomadlocal.DriverRawExec, n.Fleet.Join())
	n.start(name, agent.HCL())
	n.waitReady(name)
}

// HTTPAddr is the address (host:port) of the HTTP API of the client agent named name.
func (n *Nomad) HTTPAddr(name string) string {
	n.t.Helper()
	nodes, _, err := n.Client.Nodes().List(nil)
	if err != nil {
		n.t.Fatal(err)
	}
	for _, node := range nodes {
		if node.Name == name {
			full, _, err := n.Client.Nodes().Info(node.ID, nil)
			if err != nil {
				n.t.Fatal(err)
			}
			return full.HTTPAddr
		}
	}
	n.t.Fatalf("no client agent %s", name)
	return ""
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
	agent := nomadlocal.ClientAgent{Name: c.Name, Addr: "127.0.0.1", DataDir: filepath.Join(n.dir, c.Name), Server: n.RPC, HTTPPort: FreePort(n.t),
		Meta: c.Meta, NodePool: c.NodePool, Datacenter: c.Datacenter, Class: c.Class, Driver: nomadlocal.DriverRawExec, Join: n.Fleet.Join()}
	n.start(c.Name, agent.HCL())
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
	// The agent's data_dir (n.dir/name, by AddClient and AddTeamClient) is passable by other
	// users, as StartNomad's folder: sandboxed trainers reach a served root inside an allocation.
	if err := os.MkdirAll(filepath.Join(n.dir, name), 0o711); err != nil {
		n.t.Fatal(err)
	}
	dir := filepath.Join(n.dir, name+"-conf")
	os.MkdirAll(dir, 0o700)
	file := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
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

// AllocDir is the folder of the allocation with ID id on whichever client agent ran it ("" when
// none did): DATA_DIR/alloc/ID, as Nomad lays it out.
func (n *Nomad) AllocDir(id string) string {
	found, _ := filepath.Glob(filepath.Join(n.dir, "*", "alloc", id))
	if len(found) == 0 {
		return ""
	}
	return found[0]
}
