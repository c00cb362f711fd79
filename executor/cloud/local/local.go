// Package local is the embedded cloud.Provider: virtual nodes on this machine of every instance
// type and market the spec offers, each with its type's GPUs per node as slots, whose scale-up
// and initialisation latencies are drawn from its type's distributions and slept (times a time
// scale, for tests). The nodes it holds are kept in a file, so that a resumed driver finds them.
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

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/internal/safefile"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Provider rents virtual nodes.
type Provider struct {
	clk       clock.Clock
	file      string
	kinds     []Kind // the first is the Config's own
	timeScale float64

	spot *SpotEmulation

	mu     sync.Mutex
	rng    *rand.Rand
	state  state
	timers map[string]clock.Timer // pending emulated interruptions, by node
	// notices are the emulated spot notices given, for the driver (NextNotice).
	notices *clock.Queue[cloud.Notice]
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
	// Offer is the kind of node it rents.
	Offer cloud.Offer
	// More are the other kinds it rents (the spec's other instance types and markets); a
	// request names the one it wants.
	More []Kind
	// Slow, when set, makes a share of the nodes persistent stragglers (Node.Slowdown).
	// TimeScale multiplies every emulated latency (1 = real time; 0.01 for fast tests).
	TimeScale float64
	Rand      *rand.Rand
	// Spot, when set, interrupts the spot nodes the provider rents.
	Spot *SpotEmulation
	Slow *SlowEmulation
	// Clock is the provider's time (default the wall clock).
	Clock clock.Clock
}

// SlowEmulation makes each node slow with probability Share (the n-th node rented draws the n-th
// number of Seed's stream): every gang on a slow node runs Factor times slower, as the runtime
// tells its workers.
type SlowEmulation struct {
	Share, Factor float64
	Seed          uint64
}

// slowdown is node index's emulated slowdown: Factor or 1.
func (s *SlowEmulation) slowdown(index int) float64 {
	if s == nil || s.Factor <= 1 || s.Share <= 0 {
		return 1
	}
	if rand.New(rand.NewPCG(s.Seed, uint64(index)^0x5105)).Float64() < s.Share {
		return s.Factor
	}
	return 1
}

// Kind is one kind of node: an offer (instance type, market, price), its GPUs and its latencies.
type Kind struct {
	Offer       cloud.Offer
	GPUsPerNode int
	Scale, Init sim.Dist
	Data        float64
	Slow        *SlowEmulation // its stragglers, when it has any
}

// New returns a provider, loading the nodes an earlier driver left in the state file.
func New(cfg Config) (*Provider, error) {
	own := Kind{Offer: cfg.Offer, GPUsPerNode: cfg.GPUsPerNode, Scale: cfg.Scale, Init: cfg.Init, Data: cfg.Data, Slow: cfg.Slow}
	p := &Provider{clk: clock.Or(cfg.Clock), file: cfg.StateFile, kinds: append([]Kind{own}, cfg.More...), timeScale: cfg.TimeScale,
		rng: cfg.Rand, state: state{Nodes: map[string]cloud.Node{}}, spot: cfg.Spot}
	p.notices = clock.NewQueue[cloud.Notice](p.clk)
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
	kind, err := p.kindFor(req)
	if err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	p.mu.Lock()
	scale := kind.Scale.Sample(p.rng)
	slowest := 0.0
	for range n {
		slowest = max(slowest, kind.Init.Sample(p.rng))
	}
	p.mu.Unlock()
	if err := p.sleep(ctx, scale); err != nil {
		return nil, err
	}
	running := p.clk.Now()
	if err := p.sleep(ctx, slowest+kind.Data); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	nodes := make([]cloud.Node, n)
	for i := range nodes {
		p.state.Next++
		nodes[i] = kind.Offer.Stamp(cloud.Node{ID: fmt.Sprintf("local-%04d", p.state.Next), GPUs: kind.GPUsPerNode, Addr: "127.0.0.1", RunningAt: running})
		if f := kind.Slow.slowdown(p.state.Next); f > 1 {
			nodes[i].Slowdown = f
		}
		p.state.Nodes[nodes[i].ID] = nodes[i]
		p.watchSpot(nodes[i], p.state.Next)
	}
	return nodes, p.save()
}

// kindFor is the first kind a request asks for (empty fields of the request match any).
func (p *Provider) kindFor(req cloud.Request) (Kind, error) {
	var errs []error
	for _, k := range p.kinds {
		err := k.Offer.Check(req)
		if err == nil {
			return k, nil
		}
		errs = append(errs, err)
	}
	if len(p.kinds) == 1 {
		return Kind{}, errs[0]
	}
	return Kind{}, &cloud.CapacityError{InstanceType: req.InstanceType, Market: req.Market,
		Reason: fmt.Sprintf("this provider offers none of %s in %s", req.InstanceType, req.Market)}
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
	return p.clk.Sleep(ctx, time.Duration(seconds*p.timeScale*float64(time.Second)))
}

func (p *Provider) save() error {
	b, err := json.Marshal(p.state)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.file), 0o700); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	if err := safefile.Write(p.file, b, 0o600); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	return nil
}
