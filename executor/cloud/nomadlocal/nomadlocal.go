// Package nomadlocal is a cloud.Provider whose nodes are Nomad client agents on this machine: each
// node is one `nomad agent` with its own data directory, name and meta (rb_node, gpus), joining a
// Nomad server. Scale-up latency is what starting an agent really takes; a node is released by
// draining it and stopping its agent. It lets the Nomad backend run on one machine, and is the
// shape the EC2 provider takes with instances instead of processes. StartServer runs the
// one-server cluster that the agents join when there is no cluster to join (the CLI's own, and
// the tests'), locked down by its Fleet: a CA of its own, mutual TLS, ACLs, encrypted gossip.
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

// Provider starts and stops client agents.
type Provider struct {
	bin, dir, rpc string
	gpus          int
	driver        string
	join          Join
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
	// Driver is the one task driver the agents enable (DriverRawExec by default).
	Driver string
	// Join is how the agents join the server: the fleet's (Fleet.Join) for a server of our own.
	Join Join
}

// New returns a provider, finding the agents an earlier driver started.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	leader, err := cfg.Client.Status().Leader()
	if err != nil || leader == "" {
		return nil, fmt.Errorf("nomadlocal: no Nomad server leader (%v)", err)
	}
	p := &Provider{bin: cfg.NomadBin, dir: cfg.Dir, rpc: leader, gpus: cfg.GPUsPerNode, client: cfg.Client, freePort: cfg.FreePort, offer: cfg.Offer,
		driver: cfg.Driver, join: cfg.Join, state: state{Nodes: map[string]node{}}}
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
		if err := os.MkdirAll(data, 0o700); err != nil {
			return created, fmt.Errorf("nomadlocal: %w", err)
		}
		conf := filepath.Join(data, "agent.hcl")
		hcl := RubberbandNode(name, "127.0.0.1", filepath.Join(data, "data"), p.rpc, port, p.gpus, p.driver, p.join).HCL()
		if err := os.WriteFile(conf, []byte(hcl), 0o600); err != nil {
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
