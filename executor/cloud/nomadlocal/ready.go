package nomadlocal

import (
	"context"
	"fmt"
	"time"

	nomad "github.com/hashicorp/nomad/api"
)

// WaitNodeReady waits until the server lists a node whose meta rb_node is rbNode as ready and
// eligible for scheduling (what a gang pinned to it needs), polling every poll; ctx bounds the
// wait. Both the local agents and EC2 instances name their Nomad node after rb_node: the list
// (which carries no meta) finds it by name, and its meta is checked on the node itself.
func WaitNodeReady(ctx context.Context, client *nomad.Client, rbNode string, poll time.Duration) error {
	q := (&nomad.QueryOptions{}).WithContext(ctx)
	for {
		nodes, _, err := client.Nodes().List(q)
		if err == nil {
			for _, n := range nodes {
				if n.Name != rbNode || n.Status != nomad.NodeStatusReady || n.SchedulingEligibility != nomad.NodeSchedulingEligible {
					continue
				}
				if full, _, err := client.Nodes().Info(n.ID, q); err == nil && full.Meta["rb_node"] == rbNode {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nomad node %s not ready: %w", rbNode, ctx.Err())
		case <-time.After(poll):
		}
	}
}
