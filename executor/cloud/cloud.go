// Package cloud is what the executor needs from whoever rents it machines: the Provider
// interface. Backends live in subpackages named after what they talk to (local, nomadlocal, ec2).
package cloud

import (
	"context"
	"fmt"
	"time"
)

// Market is how a node is rented.
type Market string

// Markets.
const (
	OnDemand Market = "on-demand"
	Spot     Market = "spot"
)

// Request asks for nodes: how many, of which instance type, on which market. An empty type or
// market asks for the provider's own (the spec's cluster).
type Request struct {
	Count        int
	InstanceType string
	Market       Market
	// Token is an idempotency key the caller journals before Create; providers that rent use it
	// so that a request repeated after a crash rents nothing new (the same Token and Count give
	// back the nodes the first request rented). Empty: the provider makes one, and a repeated
	// request rents again.
	Token string
}

// CapacityError says a provider cannot rent what was asked now: no capacity in a zone, a quota,
// a type or market it does not offer. The caller may wait, ask for another type or market, or
// stop; check it with errors.As.
type CapacityError struct {
	InstanceType string
	Market       Market
	Zone         string
	Reason       string
}

func (e *CapacityError) Error() string {
	where := ""
	if e.Zone != "" {
		where = " in " + e.Zone
	}
	return fmt.Sprintf("no %s %s capacity%s: %s", e.Market, e.InstanceType, where, e.Reason)
}

// Offer is what a provider that rents one kind of node offers (the local and emulated ones).
type Offer struct {
	InstanceType string
	Market       Market
	PricePerHour float64
}

// Check says whether req asks for this offer; empty fields of req match.
func (o Offer) Check(req Request) error {
	if (req.InstanceType != "" && req.InstanceType != o.InstanceType) || (req.Market != "" && req.Market != o.market()) {
		return &CapacityError{InstanceType: req.InstanceType, Market: req.Market,
			Reason: fmt.Sprintf("this provider offers only %s %s", o.market(), o.InstanceType)}
	}
	return nil
}

// Stamp gives a node the offer's type, market and price.
func (o Offer) Stamp(n Node) Node {
	n.InstanceType, n.Market, n.PricePerHour = o.InstanceType, o.market(), o.PricePerHour
	return n
}

func (o Offer) market() Market {
	if o.Market == "" {
		return OnDemand
	}
	return o.Market
}

// Node is one rented machine.
type Node struct {
	ID   string `json:"id"`
	GPUs int    `json:"gpus"`
	// Addr is where the node's workers are reached (MASTER_ADDR for rank 0 on it).
	Addr string `json:"addr"`
	// RunningAt is when the node started running: billing starts here, before initialisation.
	RunningAt time.Time `json:"running_at"`
	// InstanceType, Market and PricePerHour are what the node is and what it costs: the cost
	// meter bills each node at its own price.
	InstanceType string  `json:"instance_type,omitempty"`
	Market       Market  `json:"market,omitempty"`
	PricePerHour float64 `json:"price_per_hour,omitempty"`
	// Zone is where a provider with zones rented it (an EC2 availability zone).
	Zone string `json:"zone,omitempty"`
	// Slowdown, above 1, makes the node an emulated persistent straggler (the local provider's
	// profile.slow_nodes): every gang with a worker on it runs that many times slower.
	Slowdown float64 `json:"slowdown,omitempty"`
	// Token is the Request.Token it was rented under, when the provider keeps it: a resumed
	// driver leaves a node it never journaled to the request that rented it, which it repeats.
	Token string `json:"token,omitempty"`
}

// Provider rents nodes for one experiment.
//
// Error contract: Create returns the nodes that did come up even when it fails for the rest, and
// the caller owns those; what it cannot rent is a *CapacityError; Delete of an unknown or already
// deleted node is not an error; List returns every node the provider holds for the experiment,
// so that a resumed driver can find what an earlier one rented. Errors are wrapped; none of a
// backend's own types leak.
//
// List reports each node's Token when the provider keeps it (the one that honours tokens must).
//
// A node going away (a crash, a spot interruption) is learnt by polling: the executor calls List
// when a gang fails (its node may be the cause) and when a driver takes over a run. A lost node
// fails its gangs first, so nothing is missed between polls, and providers need no event stream.
type Provider interface {
	// Create rents req.Count nodes and returns once they are running and initialised.
	Create(ctx context.Context, req Request) ([]Node, error)
	// Delete releases nodes.
	Delete(ctx context.Context, ids []string) error
	// List returns the nodes held now.
	List(ctx context.Context) ([]Node, error)
}

// Notice is a node's interruption notice (a spot instance's): the node goes Notice later
// (cluster.spot.notice), and its gangs with it, their checkpoints saved.
type Notice struct {
	Node   string
	Reason string // what the provider said, for the log and the journal
}
