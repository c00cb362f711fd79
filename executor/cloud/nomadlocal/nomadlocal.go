// Package nomadlocal is a cloud.Provider whose nodes are Nomad client agents on this machine: each
// node is one `nomad agent` with its own data directory, name and meta (rb_node, gpus), joining a
// Nomad server. Scale-up latency is what starting an agent really takes; a node is released by
// draining it and stopping its agent. It lets the Nomad backend run on one machine, and is the
// shape the EC2 provider takes with instances instead of processes. StartServer runs the
// one-server cluster on loopback that the agents join when there is no cluster to join (the CLI's
// own, and the tests').
package nomadlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/internal/safefile"
)

// ClientConfig is the agent configuration of one client node on this machine: its name is also
// its rb_node meta, which task groups are pinned by.
func ClientConfig(name, dataDir, serverRPC string, httpPort, gpus int) string {
	return AgentConfig(name, "127.0.0.1", dataDir, serverRPC, httpPort, gpus, false)
}

// AgentConfig is a client agent's configuration: named name (its rb_node meta too), bound and
// advertised on addr (Nomad refuses to guess rpc and serf advertise addresses, even on a
// client). Without cloudFingerprints the agent skips the cloud fingerprinters, which would
// wait on metadata services a local agent has none of.
func AgentConfig(name, addr, dataDir, serverRPC string, httpPort, gpus int, cloudFingerprints bool) string {
	options := `
  options { "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean" }`
	if cloudFingerprints {
		options = ""
	}
	return fmt.Sprintf(`name = %q
data_dir = %q
bind_addr = %q
log_level = "WARN"
ports { http = %d }
client {
  enabled = true
  servers = [%q]
  meta { rb_node = %q
    gpus = "%d" }%s
}
advertise { http = %q
  rpc = %q
  serf = %q }
plugin "raw_exec" { config { enabled = true } }
`, name, dataDir, addr, httpPort, serverRPC, name, gpus, options, addr, addr, addr)
}

// ServerConfig is the agent configuration of a one-server cluster on loopback, with heartbeats
// short enough that a lost node is noticed within seconds.
func ServerConfig(dataDir string, httpPort, rpcPort, serfPort int) string {
	return fmt.Sprintf(`name = "rb-server"
data_dir = %q
bind_addr = "127.0.0.1"
log_level = "WARN"
ports { http = %d
  rpc = %d
  serf = %d }
server { enabled = true
  bootstrap_expect = 1
  heartbeat_grace = "2s"
  min_heartbeat_ttl = "1s" }
advertise { http = "127.0.0.1"
  rpc = "127.0.0.1"
  serf = "127.0.0.1" }
`, dataDir, httpPort, rpcPort, serfPort)
}

// Provider starts and stops client agents.
type Provider struct {
	bin, dir, rpc string
	gpus          int
	client        *nomad.Client
	freePort      func() (int, error)
	offer         cloud.Offer

	mu    sync.Mutex
	state state
}

var _ cloud.Provider = (*Provider)(nil)

type state struct {
	Next  int             `json:"next"`
	Nodes map[string]node `json:"nodes"`
}

type node struct {
	cloud.Node
	PID int `json:"pid"`
}

// Config sets up the provider.
type Config struct {
	NomadBin string
	// Dir holds the agents' data directories and the provider's state file.
	Dir         string
	Client      *nomad.Client // the server's API
	GPUsPerNode int
	FreePort    func() (int, error)
	// Offer is the one kind of node it rents.
	Offer cloud.Offer
}

// New returns a provider, finding the agents an earlier driver started.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	leader, err := cfg.Client.Status().Leader()
	if err != nil || leader == "" {
		return nil, fmt.Errorf("nomadlocal: no Nomad server leader (%v)", err)
	}
	p := &Provider{bin: cfg.NomadBin, dir: cfg.Dir, rpc: leader, gpus: cfg.GPUsPerNode, client: cfg.Client, freePort: cfg.FreePort, offer: cfg.Offer,
		state: state{Nodes: map[string]node{}}}
	b, err := os.ReadFile(p.stateFile())
	if err == nil {
		if err := json.Unmarshal(b, &p.state); err != nil {
			return nil, fmt.Errorf("nomadlocal: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("nomadlocal: %w", err)
	}
	return p, nil
}

func (p *Provider) stateFile() string { return filepath.Join(p.dir, "nomad-nodes.json") }

// Create starts n client agents and waits until the server lists each as ready.
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	n := req.Count
	if err := p.offer.Check(req); err != nil {
		return nil, fmt.Errorf("nomadlocal: %w", err)
	}
	var created []cloud.Node
	for range n {
		if err := ctx.Err(); err != nil { // cancelled: start no more agents
			return created, fmt.Errorf("nomadlocal: create: %w", err)
		}
		p.mu.Lock()
		p.state.Next++
		name := fmt.Sprintf("rb-node-%04d", p.state.Next)
		p.mu.Unlock()
		port, err := p.freePort()
		if err != nil {
			return created, err
		}
		data := filepath.Join(p.dir, name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			return created, fmt.Errorf("nomadlocal: %w", err)
		}
		conf := filepath.Join(data, "agent.hcl")
		if err := os.WriteFile(conf, []byte(ClientConfig(name, filepath.Join(data, "data"), p.rpc, port, p.gpus)), 0o644); err != nil {
			return created, fmt.Errorf("nomadlocal: %w", err)
		}
		cmd, err := StartAgent(p.bin, conf, filepath.Join(data, "agent.log"))
		if err != nil {
			return created, fmt.Errorf("nomadlocal: start agent: %w", err)
		}
		go cmd.Wait() // reap; the agent's life is followed through the server
		nd := node{Node: p.offer.Stamp(cloud.Node{ID: name, GPUs: p.gpus, Addr: "127.0.0.1", RunningAt: time.Now()}), PID: cmd.Process.Pid}
		p.mu.Lock()
		p.state.Nodes[name] = nd
		err = p.save()
		p.mu.Unlock()
		if err != nil {
			return created, err
		}
		created = append(created, nd.Node)
	}
	for _, c := range created { // initialised: the server schedules onto it
		if err := p.waitReady(ctx, c.ID); err != nil {
			return created, err
		}
	}
	return created, nil
}

func (p *Provider) waitReady(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := WaitNodeReady(ctx, p.client, name, 100*time.Millisecond); err != nil {
		return fmt.Errorf("nomadlocal: %w (log: %s)", err, filepath.Join(p.dir, name, "agent.log"))
	}
	return nil
}

// Delete drains each node, stops its agent, unmounts what it mounted and removes its data.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	nodes, _, _ := p.client.Nodes().List(nil)
	for _, id := range ids {
		p.mu.Lock()
		nd, ok := p.state.Nodes[id]
		p.mu.Unlock()
		if !ok {
			continue
		}
		for _, n := range nodes {
			if n.Name == id && n.Status == "ready" {
				p.client.Nodes().UpdateDrain(n.ID, &nomad.DrainSpec{Deadline: 5 * time.Second}, false, nil)
			}
		}
		stopGroup(nd.PID)
		unmountUnder(filepath.Join(p.dir, id))
		os.RemoveAll(filepath.Join(p.dir, id))
		for _, n := range nodes {
			if n.Name == id {
				p.client.Nodes().Purge(n.ID, nil)
			}
		}
		p.mu.Lock()
		delete(p.state.Nodes, id)
		err := p.save()
		p.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// List returns the nodes whose agents are still running.
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []cloud.Node
	for _, n := range p.state.Nodes {
		if syscall.Kill(n.PID, 0) == nil {
			out = append(out, n.Node)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (p *Provider) save() error {
	b, err := json.Marshal(p.state)
	if err != nil {
		return err
	}
	if err := safefile.Write(p.stateFile(), b, 0o600); err != nil {
		return fmt.Errorf("nomadlocal: %w", err)
	}
	return nil
}

func stopGroup(pid int) {
	if pid <= 1 {
		return
	}
	syscall.Kill(-pid, syscall.SIGTERM)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Kill(-pid, syscall.SIGKILL)
}

// unmountUnder unmounts every mount point below dir, deepest first (as root, Nomad mounts tmpfs
// for task secrets and they outlive the agent).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir) {
			points = append(points, f[1])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// UnmountUnder is unmountUnder for test helpers that run agents themselves.
func UnmountUnder(dir string) { unmountUnder(dir) }

// Shutdown stops every agent this provider started, keeping its state file: for a driver that
// exits without finishing (its own server goes with it). A resumed driver finds the nodes gone,
// forgets them, and rents new ones.
func (p *Provider) Shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.state.Nodes {
		stopGroup(n.PID)
		unmountUnder(filepath.Join(p.dir, n.ID))
	}
}
