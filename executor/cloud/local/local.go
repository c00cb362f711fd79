// Package local is the embedded cloud.Provider: virtual nodes on this machine, each with the
// spec's GPUs per node as slots, whose scale-up and initialisation latencies are drawn from the
// spec's distributions and slept (times a time scale, for tests). The nodes it holds are kept in
// a file, so that a resumed driver finds them.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Provider rents virtual nodes.
type Provider struct {
	file        string
	gpus        int
	scale, init sim.Dist
	data        float64
	offer       cloud.Offer
	timeScale   float64

	spot *SpotEmulation

	mu     sync.Mutex
	rng    *rand.Rand
	state  state
	timers map[string]*time.Timer // pending emulated interruptions, by node
}

type state struct {
	Next  int                   `json:"next"`
	Nodes map[string]cloud.Node `json:"nodes"`
}

var _ cloud.Provider = (*Provider)(nil)

// Config sets up a local provider.
type Config struct {
	// StateFile keeps the nodes held (created if missing).
	StateFile   string
	GPUsPerNode int
	Scale, Init sim.Dist
	// Data is how long (seconds) a new node takes to download the dataset, after INIT.
	Data float64
	// Offer is the one kind of node it rents.
	Offer cloud.Offer
	// TimeScale multiplies every emulated latency (1 = real time; 0.01 for fast tests).
	TimeScale float64
	Rand      *rand.Rand
	// Spot, when set, interrupts the spot nodes the provider rents.
	Spot *SpotEmulation
}

// New returns a provider, loading the nodes an earlier driver left in the state file.
func New(cfg Config) (*Provider, error) {
	p := &Provider{file: cfg.StateFile, gpus: cfg.GPUsPerNode, scale: cfg.Scale, init: cfg.Init, data: cfg.Data, offer: cfg.Offer, timeScale: cfg.TimeScale,
		rng: cfg.Rand, state: state{Nodes: map[string]cloud.Node{}}, spot: cfg.Spot}
	b, err := os.ReadFile(cfg.StateFile)
	if err == nil {
		if err := json.Unmarshal(b, &p.state); err != nil {
			return nil, fmt.Errorf("local provider: read %s: %w", cfg.StateFile, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	p.mu.Lock()
	for _, n := range p.state.Nodes { // nodes an earlier driver rented go on being interruptible
		p.watchSpot(n, nodeIndex(n.ID))
	}
	p.mu.Unlock()
	return p, nil
}

// Create sleeps one SCALE latency, then the slowest of n INIT latencies and the DATA download,
// and registers the nodes.
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	n := req.Count
	if n <= 0 {
		return nil, nil
	}
	if err := p.offer.Check(req); err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	p.mu.Lock()
	scale := p.scale.Sample(p.rng)
	slowest := 0.0
	for range n {
		slowest = max(slowest, p.init.Sample(p.rng))
	}
	p.mu.Unlock()
	if err := p.sleep(ctx, scale); err != nil {
		return nil, err
	}
	running := time.Now()
	if err := p.sleep(ctx, slowest+p.data); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	nodes := make([]cloud.Node, n)
	for i := range nodes {
		p.state.Next++
		nodes[i] = p.offer.Stamp(cloud.Node{ID: fmt.Sprintf("local-%04d", p.state.Next), GPUs: p.gpus, Addr: "127.0.0.1", RunningAt: running})
		p.state.Nodes[nodes[i].ID] = nodes[i]
		p.watchSpot(nodes[i], p.state.Next)
	}
	return nodes, p.save()
}

// Delete forgets nodes.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		delete(p.state.Nodes, id)
		p.unwatch(id)
	}
	return p.save()
}

// List returns the nodes held, by ID.
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]cloud.Node, 0, len(p.state.Nodes))
	for _, n := range p.state.Nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// nodeIndex is the number in a node's ID (local-0007: 7).
func nodeIndex(id string) int {
	var n int
	fmt.Sscanf(id, "local-%d", &n)
	return n
}

func (p *Provider) sleep(ctx context.Context, seconds float64) error {
	t := time.NewTimer(time.Duration(seconds * p.timeScale * float64(time.Second)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (p *Provider) save() error {
	b, err := json.Marshal(p.state)
	if err != nil {
		return err
	}
	tmp := p.file + ".tmp"
	if err := os.MkdirAll(filepath.Dir(p.file), 0o755); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if err := os.Rename(tmp, p.file); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	return nil
}
