package ec2

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Filter picks the instances Cleanup ends: one experiment's, or (All) every instance
// rubberband rented in the region.
type Filter struct {
	Experiment string
	All        bool
	// IDs, when not nil, narrows the filter to these instances, and Groups to these security
	// groups: what a person confirmed after a dry run, so that one made since is not ended
	// unseen.
	IDs    []string
	Groups []string
}

// picks says whether f picks a resource with these tags: rubberband's run tag, and f's
// experiment unless All. Checked on every answer: tag filters take wildcards, so an experiment
// named "a*" would match others' resources.
func (f Filter) picks(tags map[string]string) bool {
	return tags[TagRun] != "" && (f.All || tags[TagExperiment] == f.Experiment)
}

// filters are the API filters that find what f picks (picks has the last word).
func (f Filter) filters() []types.Filter {
	out := []types.Filter{filter("tag-key", TagRun)}
	if !f.All {
		out = append(out, filter("tag:"+TagExperiment, f.Experiment))
	}
	return out
}

func (f Filter) check() error {
	if (f.Experiment == "") == !f.All {
		return errors.New("give an experiment or all, not both or neither")
	}
	return nil
}

// cleanupProvider is a Provider for what Cleanup and CleanupGroups do outside a run. A cfg
// without a retryer gets the provider's adaptive one.
func cleanupProvider(cfg aws.Config) (*Provider, error) {
	if cfg.Retryer == nil {
		cfg.Retryer = func() aws.Retryer { return newRetryer(0) }
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region")
	}
	return &Provider{cfg: Config{PollInterval: DefaultPollInterval, GroupTimeout: DefaultGroupTimeout}, ec2: ec2.NewFromConfig(cfg)}, nil
}

// Instance is an instance Cleanup found.
type Instance struct {
	ID         string       `json:"id"`
	Type       string       `json:"instance_type"`
	Zone       string       `json:"zone"`
	Market     cloud.Market `json:"market"`
	Experiment string       `json:"experiment"`
	Run        string       `json:"run"`
	Node       string       `json:"node,omitempty"`
	LaunchTime time.Time    `json:"launch_time,omitzero"`
	// State is the state it was found in, before Cleanup terminated it.
	State string `json:"state"`
}

// cleanupStates are the states of an instance that bills, or may again (a stopped one keeps
// its volumes and can be started).
var cleanupStates = []string{"pending", "running", "stopping", "stopped"}

// Cleanup finds the instances rubberband rented (tag rubberband:run) in cfg's region that f
// picks, pending to stopped, and, unless dryRun, terminates them and returns once EC2 has
// acknowledged each. It returns what it found (dry run) or terminated, sorted by experiment,
// run, launch time and ID. An instance without rubberband's run tag, or of another experiment,
// is never touched, whatever the API's filters let through. A cfg without a retryer gets the
// provider's adaptive one.
func Cleanup(ctx context.Context, cfg aws.Config, f Filter, dryRun bool) ([]Instance, error) {
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("ec2: cleanup: %w", err)
	}
	p, err := cleanupProvider(cfg)
	if err != nil {
		return nil, fmt.Errorf("ec2: cleanup: %w", err)
	}
	filters := append(f.filters(), filter("instance-state-name", cleanupStates...))
	var found []types.Instance
	if f.IDs == nil {
		var err error
		if found, err = p.describe(ctx, filters...); err != nil {
			return nil, fmt.Errorf("ec2: cleanup: find instances: %w", err)
		}
	}
	for start := 0; start < len(f.IDs); start += maxFilterValues {
		batch := append(slices.Clip(filters), filter("instance-id", f.IDs[start:min(start+maxFilterValues, len(f.IDs))]...))
		insts, err := p.describe(ctx, batch...)
		if err != nil {
			return nil, fmt.Errorf("ec2: cleanup: find instances: %w", err)
		}
		found = append(found, insts...)
	}
	var out []Instance
	for _, in := range found {
		tags := map[string]string{}
		for _, t := range in.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		if !f.picks(tags) {
			continue
		}
		i := Instance{ID: aws.ToString(in.InstanceId), Type: string(in.InstanceType), Market: marketOf(in),
			Experiment: tags[TagExperiment], Run: tags[TagRun], Node: tags[TagNode], LaunchTime: aws.ToTime(in.LaunchTime)}
		if in.Placement != nil {
			i.Zone = aws.ToString(in.Placement.AvailabilityZone)
		}
		if in.State != nil {
			i.State = string(in.State.Name)
		}
		if !slices.ContainsFunc(out, func(o Instance) bool { return o.ID == i.ID }) {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Experiment, b.Experiment), cmp.Compare(a.Run, b.Run),
			a.LaunchTime.Compare(b.LaunchTime), cmp.Compare(a.ID, b.ID))
	})
	if dryRun || len(out) == 0 {
		return out, nil
	}
	ids := make([]string, len(out))
	for i, in := range out {
		ids[i] = in.ID
	}
	if err := p.terminate(ctx, ids, false); err != nil {
		return nil, fmt.Errorf("ec2: cleanup: %w", err)
	}
	return out, nil
}

// Group is a security group CleanupGroups found.
type Group struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	VpcID      string `json:"vpc_id"`
	Experiment string `json:"experiment"`
	Run        string `json:"run"`
}

// CleanupGroups finds the security groups rubberband made for runs (tag rubberband:run) in
// cfg's region that f picks and, unless dryRun, deletes them, waiting while the instances that
// hold one shut down (call it after Cleanup). It returns what it found (dry run) or deleted,
// sorted by experiment, run and ID. A group that a live instance (pending to stopped) still
// uses is kept, and said in the error, which wraps a *GroupInUseError for each; a group
// without rubberband's run tag, or of another experiment, is never touched.
func CleanupGroups(ctx context.Context, cfg aws.Config, f Filter, dryRun bool) ([]Group, error) {
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("ec2: cleanup: %w", err)
	}
	p, err := cleanupProvider(cfg)
	if err != nil {
		return nil, fmt.Errorf("ec2: cleanup: %w", err)
	}
	found, err := describeGroups(ctx, p.ec2, f.filters()...)
	if err != nil {
		return nil, fmt.Errorf("ec2: cleanup: find security groups: %w", err)
	}
	var out []Group
	for _, g := range found {
		tags := map[string]string{}
		for _, t := range g.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		id := aws.ToString(g.GroupId)
		if !f.picks(tags) || (f.Groups != nil && !slices.Contains(f.Groups, id)) {
			continue
		}
		out = append(out, Group{ID: id, Name: aws.ToString(g.GroupName), VpcID: aws.ToString(g.VpcId), Experiment: tags[TagExperiment], Run: tags[TagRun]})
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Experiment, b.Experiment), cmp.Compare(a.Run, b.Run), cmp.Compare(a.ID, b.ID))
	})
	if dryRun {
		return out, nil
	}
	var deleted []Group
	var errs []error
	for _, g := range out {
		if err := p.deleteGroup(ctx, g.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, g)
	}
	if err := errors.Join(errs...); err != nil {
		return deleted, fmt.Errorf("ec2: cleanup: %w", err)
	}
	return deleted, nil
}
