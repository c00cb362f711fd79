package nomadpool

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// ClaimPrefix starts the path of every claim variable: ClaimPrefix + the Nomad node ID.
const ClaimPrefix = "rubberband/claims/"

// claim is one claim variable: which run holds which client since when, and what the run needs
// of the client to list it again without looking it up.
type claim struct {
	nodeID                   string
	run, experiment, token   string
	at                       time.Time
	name, addr, instanceType string
	gpus                     int
	index                    uint64 // the variable's ModifyIndex: a release deletes only this version
}

func claimPath(nodeID string) string { return ClaimPrefix + nodeID }

func (c claim) items() nomad.VariableItems {
	return nomad.VariableItems{"run": c.run, "experiment": c.experiment, "token": c.token,
		"claimed_at": c.at.UTC().Format(time.RFC3339Nano), "node": c.name, "addr": c.addr,
		"gpus": strconv.Itoa(c.gpus), "instance_type": c.instanceType}
}

// parseClaim reads a claim variable; one whose claimed_at is unreadable is still a claim (its
// client stays taken) and bills from the variable's creation.
func parseClaim(v *nomad.Variable) claim {
	it := v.Items
	c := claim{nodeID: strings.TrimPrefix(v.Path, ClaimPrefix), run: it["run"], experiment: it["experiment"], token: it["token"],
		name: it["node"], addr: it["addr"], instanceType: it["instance_type"], index: v.ModifyIndex}
	c.gpus, _ = strconv.Atoi(it["gpus"])
	at, err := time.Parse(time.RFC3339Nano, it["claimed_at"])
	if err != nil {
		at = time.Unix(0, v.CreateTime)
	}
	c.at = at
	return c
}

func (c claim) node(price float64) cloud.Node {
	return cloud.Node{ID: c.nodeID, GPUs: c.gpus, Addr: c.addr, RunningAt: c.at, InstanceType: c.instanceType,
		Market: cloud.OnDemand, PricePerHour: price}
}

// errTaken says another writer created the claim first.
var errTaken = errors.New("claimed by another run")

// create writes the claim if no claim of the client exists: check-and-set at index 0, so that of
// two drivers claiming one client at once exactly one succeeds.
func (p *Provider) create(ctx context.Context, c claim) (claim, error) {
	v, _, err := p.cfg.Client.Variables().CheckedCreate(&nomad.Variable{Path: claimPath(c.nodeID), Items: c.items()},
		(&nomad.WriteOptions{}).WithContext(ctx))
	var conflict nomad.ErrCASConflict
	if errors.As(err, &conflict) {
		return c, errTaken
	}
	if err != nil {
		return c, fmt.Errorf("claim node %s: %w", c.nodeID, err)
	}
	c.index = v.ModifyIndex
	return c, nil
}

// scan reads every claim: the node IDs claimed by anyone, and this run's claims.
func (p *Provider) scan(ctx context.Context) (map[string]bool, []claim, error) {
	q := (&nomad.QueryOptions{}).WithContext(ctx)
	metas, _, err := p.cfg.Client.Variables().PrefixList(ClaimPrefix, q)
	if err != nil {
		return nil, nil, fmt.Errorf("list claims: %w", err)
	}
	taken := map[string]bool{}
	var mine []claim
	for _, m := range metas {
		taken[strings.TrimPrefix(m.Path, ClaimPrefix)] = true
		v, _, err := p.cfg.Client.Variables().Read(m.Path, q)
		if errors.Is(err, nomad.ErrVariablePathNotFound) {
			continue // released since the list
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read claim %s: %w", m.Path, err)
		}
		if c := parseClaim(v); c.run == p.cfg.RunID {
			mine = append(mine, c)
		}
	}
	return taken, mine, nil
}

// release deletes this run's claim of a client: check-and-set on the ModifyIndex just read, so
// that a claim rewritten meanwhile (by another run, after the client was released and claimed
// again) is never deleted. A claim that is gone or another run's is left as it is.
func (p *Provider) release(ctx context.Context, nodeID string) error {
	vars := p.cfg.Client.Variables()
	for range 5 {
		v, _, err := vars.Read(claimPath(nodeID), (&nomad.QueryOptions{}).WithContext(ctx))
		if errors.Is(err, nomad.ErrVariablePathNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read claim of %s: %w", nodeID, err)
		}
		if parseClaim(v).run != p.cfg.RunID {
			return nil
		}
		_, err = vars.CheckedDelete(v.Path, v.ModifyIndex, (&nomad.WriteOptions{}).WithContext(ctx))
		var conflict nomad.ErrCASConflict
		if errors.As(err, &conflict) {
			continue // changed since the read: read it again
		}
		if err != nil {
			return fmt.Errorf("release %s: %w", nodeID, err)
		}
		return nil
	}
	return fmt.Errorf("release %s: its claim kept changing", nodeID)
}
