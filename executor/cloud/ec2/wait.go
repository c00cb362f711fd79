package ec2

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// maxFilterValues is what one DescribeInstances filter takes.
const maxFilterValues = 200

// cleanupTimeout bounds the release of what a failed Create started, which runs even when the
// Create's context is done.
const cleanupTimeout = 2 * time.Minute

// waitRunning polls the rented nodes until each runs, ends, or the wait is over (the context,
// or BootTimeout). One DescribeInstances serves every node of the Create.
func (p *Provider) waitRunning(ctx context.Context, nodes []*launch) {
	pending := map[string]*launch{}
	for _, n := range nodes {
		if n.id != "" && n.err == nil {
			pending[n.id] = n
		}
	}
	boot, cancel := context.WithTimeout(ctx, p.cfg.BootTimeout)
	defer cancel()
	interval := p.cfg.PollInterval
	timer := time.NewTimer(0) // the instance may be running already (a replayed request)
	defer timer.Stop()
	for len(pending) > 0 {
		select {
		case <-boot.Done():
			err := ctx.Err()
			if err == nil {
				err = fmt.Errorf("still pending after %v (the boot timeout)", p.cfg.BootTimeout)
			}
			for _, n := range pending {
				n.err = fmt.Errorf("node %s: instance %s is not running: %w", n.name, n.id, err)
			}
			return
		case <-timer.C:
		}
		sent := p.cfg.Clock()
		insts, err := p.describeIDs(boot, keys(pending))
		if err != nil && boot.Err() == nil {
			for _, n := range pending {
				n.err = fmt.Errorf("node %s: watch instance %s: %w", n.name, n.id, err)
			}
			return
		}
		for _, in := range insts {
			n := pending[aws.ToString(in.InstanceId)]
			if n == nil || in.State == nil {
				continue
			}
			switch in.State.Name {
			case types.InstanceStateNamePending:
				continue
			case types.InstanceStateNameRunning:
				n.inst, n.running = in, runningAt(n.rented, in, sent)
			default:
				n.err = ended(n, in)
			}
			delete(pending, n.id)
		}
		timer.Reset(interval)
		interval = min(interval*3/2, 4*p.cfg.PollInterval)
	}
}

// runningAt is when a node started billing: when this poll was sent, if the instance was
// pending when rented (it ran since); LaunchTime, if it ran already (a repeated request's
// instance, whose start nobody here saw: the earliest it can have billed from).
func runningAt(rented, seen types.Instance, sent time.Time) time.Time {
	if rented.State != nil && rented.State.Name == types.InstanceStateNamePending {
		return sent
	}
	if seen.LaunchTime != nil {
		return *seen.LaunchTime
	}
	return sent
}

// ended says why an instance ended before it ran; a spot instance taken back is capacity.
func ended(n *launch, in types.Instance) error {
	reason := ""
	if in.StateReason != nil {
		reason = aws.ToString(in.StateReason.Code)
	}
	if reason == "Server.SpotInstanceTermination" {
		return &cloud.CapacityError{InstanceType: string(in.InstanceType), Market: cloud.Spot,
			Reason: fmt.Sprintf("spot instance %s was taken back while it booted", n.id)}
	}
	return fmt.Errorf("node %s: instance %s is %s before it ran (%s)", n.name, n.id, in.State.Name, reason)
}

func keys(m map[string]*launch) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// describeIDs describes instances by ID through a filter: an instance EC2 does not show yet
// (its API is eventually consistent) is missing from the answer rather than an error.
func (p *Provider) describeIDs(ctx context.Context, ids []string) ([]types.Instance, error) {
	var out []types.Instance
	for start := 0; start < len(ids); start += maxFilterValues {
		insts, err := p.describe(ctx, filter("instance-id", ids[start:min(start+maxFilterValues, len(ids))]...))
		if err != nil {
			return out, err
		}
		out = append(out, insts...)
	}
	return out, nil
}

// readyAll waits for Ready on every running node at once. An instance that stops running
// meanwhile (its user-data failed, spot took it back) ends its wait at once: its node can no
// longer come.
func (p *Provider) readyAll(ctx context.Context, nodes []*launch) {
	cancels := map[string]context.CancelCauseFunc{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.running.IsZero() || n.err != nil {
			continue
		}
		if p.cfg.Ready == nil {
			n.ready = true
			continue
		}
		nctx, cancel := context.WithCancelCause(ctx)
		cancels[n.id] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel(nil)
			if err := p.cfg.Ready(nctx, n.id); err != nil {
				if cause := context.Cause(nctx); ctx.Err() == nil && errors.Is(cause, errStopped) {
					err = cause
				}
				n.err = fmt.Errorf("node %s: instance %s is not ready: %w", n.name, n.id, err)
				return
			}
			// A Ready that returns nil as the context ends still hands over a node that is up.
			n.ready = true
		}()
	}
	if len(cancels) == 0 {
		return
	}
	watch, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.watchRunning(watch, cancels) }()
	wg.Wait()
	stop()
	<-done
}

// errStopped is why a node's Ready was cancelled: its instance left running.
var errStopped = errors.New("instance stopped running")

// watchRunning polls the instances whose Ready is awaited and cancels the wait of each one that
// is no longer running, until ctx ends.
func (p *Provider) watchRunning(ctx context.Context, cancels map[string]context.CancelCauseFunc) {
	ids := make([]string, 0, len(cancels))
	for id := range cancels {
		ids = append(ids, id)
	}
	tick := time.NewTicker(4 * p.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		insts, err := p.describeIDs(ctx, ids)
		if err != nil {
			continue // the next poll may see it; Ready's own bound still holds
		}
		for _, in := range insts {
			if in.State == nil || in.State.Name == types.InstanceStateNameRunning {
				continue
			}
			reason := ""
			if in.StateReason != nil {
				reason = aws.ToString(in.StateReason.Code)
			}
			if cancel := cancels[aws.ToString(in.InstanceId)]; cancel != nil {
				cancel(fmt.Errorf("%w: %s (%s)", errStopped, in.State.Name, reason))
			}
		}
	}
}

// cleanup terminates every instance the Create started and does not return: those rented and
// not ready, and those a RunInstances without a definite answer (a cancelled context, a lost
// connection, a server error) may have rented, found by their tokens.
func (p *Provider) cleanup(ctx context.Context, nodes []*launch) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var ids, tokens []string
	for _, n := range nodes {
		switch {
		case n.ready:
		case n.id != "":
			ids = append(ids, n.id)
		case n.unsure:
			tokens = append(tokens, n.token)
		}
	}
	for start := 0; start < len(tokens); start += maxFilterValues {
		found, err := p.describe(ctx, filter("client-token", tokens[start:min(start+maxFilterValues, len(tokens))]...),
			filter("tag:"+TagRun, p.cfg.RunID), filter("instance-state-name", liveStates...))
		if err != nil {
			return fmt.Errorf("find the instances of requests that got no answer (List shows them): %w", err)
		}
		for _, in := range found {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := p.terminate(ctx, ids, true); err != nil {
		return fmt.Errorf("release instances %v that did not come up (List shows them): %w", ids, err)
	}
	return nil
}
