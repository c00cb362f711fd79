// Package cloud is what the executor needs from whoever rents it machines: the Provider
// interface. Backends live in subpackages named after what they talk to (local here; ec2 next).
package cloud

import (
	"context"
	"time"
)

// Node is one rented machine.
type Node struct {
	ID   string `json:"id"`
	GPUs int    `json:"gpus"`
	// Addr is where the node's workers are reached (MASTER_ADDR for rank 0 on it).
	Addr string `json:"addr"`
	// RunningAt is when the node started running: billing starts here, before initialisation.
	RunningAt time.Time `json:"running_at"`
}

// Provider rents nodes for one experiment.
//
// Error contract: Create returns the nodes that did come up even when it fails for the rest, and
// the caller owns those; Delete of an unknown or already deleted node is not an error; List
// returns every node the provider holds for the experiment, so that a resumed driver can find
// what an earlier one rented. Errors are wrapped; none of a backend's own types leak.
type Provider interface {
	// Create rents n nodes and returns once they are running and initialised.
	Create(ctx context.Context, n int) ([]Node, error)
	// Delete releases nodes.
	Delete(ctx context.Context, ids []string) error
	// List returns the nodes held now.
	List(ctx context.Context) ([]Node, error)
}
