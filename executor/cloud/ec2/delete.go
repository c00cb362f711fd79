package ec2

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// maxTerminate is what one TerminateInstances takes.
const maxTerminate = 1000

var instanceIDRE = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)

// Delete terminates the run's instances among ids, and returns once EC2 has acknowledged each
// (shutting-down or terminated), not once they are gone: billing stops at shutting-down. An ID
// that is not an instance of this run, or one already ended, is not an error, and is never
// terminated: a stray ID cannot end another run's instance. Config.Drain sees the live ones
// first.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	var want []string
	for _, id := range ids {
		if instanceIDRE.MatchString(id) && !slices.Contains(want, id) {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	var live []string
	for start := 0; start < len(want); start += maxFilterValues {
		found, err := p.describe(ctx, filter("instance-id", want[start:min(start+maxFilterValues, len(want))]...),
			filter("tag:"+TagRun, p.cfg.RunID), filter("instance-state-name", "pending", "running", "stopping", "stopped"))
		if err != nil {
			return fmt.Errorf("ec2: delete nodes: find %v: %w", want, err)
		}
		for _, in := range found {
			live = append(live, aws.ToString(in.InstanceId))
		}
	}
	if p.cfg.Drain != nil && len(live) > 0 {
		p.cfg.Drain(ctx, live)
	}
	if err := p.terminate(ctx, live, false); err != nil {
		return fmt.Errorf("ec2: delete nodes: %w", err)
	}
	return nil
}

// terminate ends instances and waits for EC2's acknowledgement. An instance EC2 does not know
// is skipped, unless fresh: one just rented may not be visible yet (EC2's API is eventually
// consistent), and is asked again until it is.
func (p *Provider) terminate(ctx context.Context, ids []string, fresh bool) error {
	var unacked []string
	for start := 0; start < len(ids); start += maxTerminate {
		batch := ids[start:min(start+maxTerminate, len(ids))]
		out, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: batch})
		if apiCode(err) == "InvalidInstanceID.NotFound" {
			// One unknown ID fails the whole call: go one by one.
			for _, id := range batch {
				u, err := p.terminateOne(ctx, id, fresh)
				if err != nil {
					return err
				}
				unacked = append(unacked, u...)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("terminate %v: %w", batch, err)
		}
		unacked = append(unacked, notAcked(out.TerminatingInstances)...)
	}
	return p.waitAcked(ctx, unacked)
}

func (p *Provider) terminateOne(ctx context.Context, id string, fresh bool) ([]string, error) {
	wait := 200 * time.Millisecond
	for {
		out, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		switch {
		case err == nil:
			return notAcked(out.TerminatingInstances), nil
		case apiCode(err) != "InvalidInstanceID.NotFound":
			return nil, fmt.Errorf("terminate %s: %w", id, err)
		case !fresh:
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("terminate %s (not visible yet): %w", id, ctx.Err())
		case <-time.After(wait):
			wait = min(2*wait, 5*time.Second)
		}
	}
}

// notAcked are the instances a TerminateInstances left neither shutting-down nor terminated.
func notAcked(changes []types.InstanceStateChange) []string {
	var out []string
	for _, c := range changes {
		if c.CurrentState == nil || !ending(c.CurrentState.Name) {
			out = append(out, aws.ToString(c.InstanceId))
		}
	}
	return out
}

func ending(s types.InstanceStateName) bool {
	return s == types.InstanceStateNameShuttingDown || s == types.InstanceStateNameTerminated
}

// waitAcked polls until every instance of ids is shutting down or terminated.
func (p *Provider) waitAcked(ctx context.Context, ids []string) error {
	wait := p.cfg.PollInterval
	for len(ids) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("instances %v not yet shutting down: %w", ids, ctx.Err())
		case <-time.After(wait):
			wait = min(wait*3/2, 4*p.cfg.PollInterval)
		}
		insts, err := p.describeIDs(ctx, ids)
		if err != nil {
			return fmt.Errorf("watch the termination of %v: %w", ids, err)
		}
		ids = ids[:0]
		for _, in := range insts {
			if in.State != nil && !ending(in.State.Name) {
				ids = append(ids, aws.ToString(in.InstanceId))
			}
		}
	}
	return nil
}
