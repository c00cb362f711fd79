package spotnotice

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Prefix is where run runID's notices live in the store: one object a node.
func Prefix(runID string) string { return "runs/" + runID + "/notices/" }

// maxReason bounds what a notice's object is read for: a notice is a line.
const maxReason = 4 << 10

// Give writes node's notice (reason: what the node was told) for run runID's driver. Every
// worker on the node may give it: the object is the same.
func Give(ctx context.Context, store checkpoint.Store, runID, node, reason string) error {
	if runID == "" || node == "" || strings.Contains(node, "/") {
		return fmt.Errorf("spotnotice: no run or node to give the notice for (run %q, node %q)", runID, node)
	}
	if _, err := store.Put(ctx, Prefix(runID)+node, strings.NewReader(reason)); err != nil {
		return fmt.Errorf("spotnotice: give the notice of node %s: %w", node, err)
	}
	return nil
}

// Source finds the notices given for a run by polling the store every Every (of Clock; the
// wall clock if nil, every 5 s if 0). It hands each node's notice once, and remembers nothing
// across drivers: a resumed driver hears again of nodes noticed before, which the executor
// ignores for nodes it no longer holds.
type Source struct {
	Store checkpoint.Store
	RunID string
	Clock clock.Clock
	Every time.Duration
	// Log is told of a failed poll (nil: not said); the next poll tries again.
	Log io.Writer

	seen    map[string]bool
	pending []cloud.Notice
}

// NextNotice is the next node's notice not handed yet, waiting for one until ctx ends.
func (s *Source) NextNotice(ctx context.Context) (cloud.Notice, error) {
	clk, every := clock.Or(s.Clock), s.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	for len(s.pending) == 0 {
		if err := s.poll(ctx); err != nil && s.Log != nil && ctx.Err() == nil {
			fmt.Fprintf(s.Log, "spot notices: %v (trying again in %s)\n", err, every)
		}
		if len(s.pending) > 0 {
			break
		}
		if err := clk.Sleep(ctx, every); err != nil {
			return cloud.Notice{}, err
		}
	}
	n := s.pending[0]
	s.pending = s.pending[1:]
	return n, nil
}

// poll adds the notices not seen yet to pending, in key order.
func (s *Source) poll(ctx context.Context) error {
	list, err := s.Store.List(ctx, Prefix(s.RunID))
	if err != nil {
		return err
	}
	for _, o := range list {
		if s.seen[o.Key] {
			continue
		}
		r, _, err := s.Store.Open(ctx, o.Key)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(r, maxReason))
		r.Close()
		if err != nil {
			return err
		}
		s.seen[o.Key] = true
		node := strings.TrimPrefix(o.Key, Prefix(s.RunID))
		reason := strings.TrimSpace(string(b))
		if reason == "" {
			reason = "spot interruption notice"
		}
		s.pending = append(s.pending, cloud.Notice{Node: node, Reason: fmt.Sprintf("%s (node %s)", reason, node)})
	}
	return nil
}
