package nomadpool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Config sets up the provider.
type Config struct {
	// Client talks to the team's cluster (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_NAMESPACE: the claim
	// variables live in its namespace).
	Client *nomad.Client
	// RunID owns the claims: a provider opened with the same run ID finds them. Experiment is
	// written beside it, for people reading the variables.
	RunID, Experiment string
	// Pool selects the clients.
	Pool spec.NomadPool
	// GPUsPerNode is the least a client must have, and what one that says nothing has.
	GPUsPerNode int
	// InstanceType names the nodes (the spec's cluster.instance_type); empty: each client's node
	// class.
	InstanceType string
	// PricePerHour is what a claimed client costs per hour (a team's internal rate; 0 is fine).
	PricePerHour float64
}

// Provider claims and releases a team's Nomad clients. It keeps no state of its own (the claim
// variables are the state) and is safe for concurrent use.
type Provider struct {
	cfg Config
}

var _ cloud.Provider = (*Provider)(nil)

// New checks cfg and that the cluster answers.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("nomadpool: no Nomad client")
	case cfg.RunID == "":
		return nil, errors.New("nomadpool: no run ID: claims would belong to no run")
	case cfg.GPUsPerNode < 1:
		return nil, fmt.Errorf("nomadpool: %d GPUs per node", cfg.GPUsPerNode)
	}
	if leader, err := cfg.Client.Status().Leader(); err != nil || leader == "" {
		return nil, fmt.Errorf("nomadpool: no Nomad server leader (%v)", err)
	}
	return &Provider{cfg: cfg}, nil
}

// Create claims req.Count free matching clients, or gives back what an earlier request under the
// same Token claimed and claims only the rest.
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nomadpool: create: %w", err)
	}
	if err := p.check(req); err != nil {
		return nil, fmt.Errorf("nomadpool: %w", err)
	}
	if req.Count <= 0 {
		return nil, nil
	}
	token := req.Token
	if token == "" {
		token = newToken()
	}
	taken, mine, err := p.scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("nomadpool: create: %w", err)
	}
	var got []cloud.Node
	for _, c := range mine {
		if c.token == token {
			got = append(got, c.node(p.cfg.PricePerHour))
		}
	}
	if len(got) >= req.Count {
		return got, nil
	}
	cands, err := p.candidates(ctx, req.InstanceType)
	if err != nil {
		return got, fmt.Errorf("nomadpool: create: %w", err)
	}
	free := 0
	for _, c := range cands {
		if taken[c.id] {
			continue
		}
		free++
		if len(got) == req.Count {
			continue // counting the free ones, for the error below
		}
		if err := ctx.Err(); err != nil { // cancelled: claim no more
			return got, fmt.Errorf("nomadpool: create: %w", err)
		}
		// Claimed whatever ctx does: a write cut off half way may have claimed the client without
		// our knowing, and a claim the caller does not know of would hold it for ever.
		cl, err := p.create(context.WithoutCancel(ctx), p.claimOf(c, token))
		if errors.Is(err, errTaken) {
			continue
		}
		if err != nil {
			return got, fmt.Errorf("nomadpool: %w", err)
		}
		got = append(got, cl.node(p.cfg.PricePerHour))
	}
	if len(got) < req.Count {
		return got, fmt.Errorf("nomadpool: %w", &cloud.CapacityError{InstanceType: req.InstanceType, Market: cloud.OnDemand,
			Reason: fmt.Sprintf("%d client(s) of the Nomad cluster match cluster.nomad, %d of them free; %d wanted, %d claimed",
				len(cands), free, req.Count, len(got))})
	}
	return got, nil
}

// check refuses a request for another market, or for another instance type than the one
// configured (without one, a type is a node class, which candidates filters by).
func (p *Provider) check(req cloud.Request) error {
	if req.Market != "" && req.Market != cloud.OnDemand {
		return &cloud.CapacityError{InstanceType: req.InstanceType, Market: req.Market, Reason: "a team's Nomad clients are on-demand nodes"}
	}
	if p.cfg.InstanceType != "" && req.InstanceType != "" && req.InstanceType != p.cfg.InstanceType {
		return &cloud.CapacityError{InstanceType: req.InstanceType, Market: cloud.OnDemand,
			Reason: fmt.Sprintf("this provider's clients are %s nodes", p.cfg.InstanceType)}
	}
	return nil
}

func (p *Provider) claimOf(c candidate, token string) claim {
	it := p.cfg.InstanceType
	if it == "" {
		it = c.class
	}
	return claim{nodeID: c.id, run: p.cfg.RunID, experiment: p.cfg.Experiment, token: token, at: time.Now(),
		name: c.name, addr: c.addr, instanceType: it, gpus: c.gpus}
}

// candidates lists the clients that match the pool now (of node class class, when the provider
// names nodes by class and a class is asked for), by name.
func (p *Provider) candidates(ctx context.Context, class string) ([]candidate, error) {
	q := (&nomad.QueryOptions{}).WithContext(ctx)
	stubs, _, err := p.cfg.Client.Nodes().List(q)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []candidate
	for _, s := range stubs {
		if !listed(s, p.cfg.Pool) || (p.cfg.InstanceType == "" && class != "" && s.NodeClass != class) {
			continue
		}
		n, _, err := p.cfg.Client.Nodes().Info(s.ID, q)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", s.Name, err)
		}
		if c, ok := match(n, p.cfg.Pool, p.cfg.GPUsPerNode); ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].id < out[j].id
	})
	return out, nil
}

// Delete releases this run's claims of the clients named; other runs' claims, unknown IDs and
// clients not claimed are left alone.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := p.release(ctx, id); err != nil {
			return fmt.Errorf("nomadpool: %w", err)
		}
	}
	return nil
}

// List returns the clients this run holds claims on. A claim whose client left the cluster or is
// down is released instead: the executor learns the node is lost, and the claim does not
// outlive the client.
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	_, mine, err := p.scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("nomadpool: %w", err)
	}
	if len(mine) == 0 {
		return nil, nil
	}
	stubs, _, err := p.cfg.Client.Nodes().List((&nomad.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("nomadpool: list nodes: %w", err)
	}
	status := map[string]string{}
	for _, s := range stubs {
		status[s.ID] = s.Status
	}
	var out []cloud.Node
	for _, c := range mine {
		if st, ok := status[c.nodeID]; !ok || st == nomad.NodeStatusDown {
			if err := p.release(ctx, c.nodeID); err != nil {
				return nil, fmt.Errorf("nomadpool: %w", err)
			}
			continue
		}
		out = append(out, c.node(p.cfg.PricePerHour))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// newToken is a request token for a caller that gave none: its request is claimed anew when
// repeated.
func newToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "auto-" + hex.EncodeToString(b)
}
