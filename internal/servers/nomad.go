package servers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	bin    string
	dir    string
	t      testing.TB
	agents map[string]*agent
	Client *nomad.Client
}

type agent struct {
	cmd *exec.Cmd
	dir string
}

// StartNomad starts a Nomad server in a temporary directory.
func StartNomad(t testing.TB) *Nomad {
	t.Helper()
	n := &Nomad{bin: Binary(t, "nomad", "RB_NOMAD_BIN"), t: t, agents: map[string]*agent{}}
	dir, err := os.MkdirTemp("", "rb-nomad-")
	if err != nil {
		t.Fatal(err)
	}
	n.dir = dir
	http, rpc, serf := FreePort(t), FreePort(t), FreePort(t)
	n.Addr, n.RPC = fmt.Sprintf("http://127.0.0.1:%d", http), fmt.Sprintf("127.0.0.1:%d", rpc)
	cfg := nomadlocal.ServerConfig(filepath.Join(dir, "server"), http, rpc, serf)
	t.Cleanup(n.Stop)
	n.start("server", cfg)
	c, err := nomad.NewClient(&nomad.Config{Address: n.Addr})
	if err != nil {
		t.Fatal(err)
	}
	n.Client, n.Bin = c, n.bin
	deadline := time.Now().Add(60 * time.Second)
	for {
		if leader, err := c.Status().Leader(); err == nil && leader != "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("nomad server elected no leader:\n%s", n.log("server"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// AddClient starts a client agent named name with gpus GPUs in its meta, and waits until the
// server lists it as ready.
func (n *Nomad) AddClient(name string, gpus int) {
	n.t.Helper()
	n.start(name, nomadlocal.ClientConfig(name, filepath.Join(n.dir, name), n.RPC, FreePort(n.t), gpus))
	deadline := time.Now().Add(60 * time.Second)
	for {
		nodes, _, err := n.Client.Nodes().List(nil)
		if err == nil {
			for _, node := range nodes {
				if node.Name == name && node.Status == "ready" {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("nomad client %s never became ready:\n%s", name, n.log(name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *Nomad) start(name, cfg string) {
	n.t.Helper()
	dir := filepath.Join(n.dir, name+"-conf")
	os.MkdirAll(dir, 0o755)
	file := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		n.t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		n.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(n.bin, "agent", "-config", file)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start nomad %s: %v", name, err)
	}
	n.agents[name] = &agent{cmd: cmd, dir: filepath.Join(n.dir, name)}
}

// log returns the end of an agent's output.
func (n *Nomad) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(n.dir, name+"-conf", "agent.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// KillClient stops a client agent abruptly, as a lost node.
func (n *Nomad) KillClient(name string) {
	if a, ok := n.agents[name]; ok && a.cmd.Process != nil {
		syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		a.cmd.Wait()
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
	for name, a := range n.agents {
		stopGroup(a.cmd, 10*time.Second)
		delete(n.agents, name)
	}
	nomadlocal.UnmountUnder(n.dir)
	os.RemoveAll(n.dir)
	os.RemoveAll("/tmp/alloc_mounts")
}
