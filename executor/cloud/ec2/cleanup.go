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
	// IDs, when not nil, narrows the filter to these instances: what a person confirmed after
	// a dry run, so that one rented since is not ended unseen.
	IDs []string
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
	if (f.Experiment == "") == !f.All {
		return nil, errors.New("ec2: cleanup: give an experiment or all, not both or neither")
	}
	if cfg.Retryer == nil {
		cfg.Retryer = func() aws.Retryer { return newRetryer(0) }
	}
	if cfg.Region == "" {
		return nil, errors.New("ec2: cleanup: no AWS region")
	}
	p := &Provider{cfg: Config{PollInterval: DefaultPollInterval}, ec2: ec2.NewFromConfig(cfg)}
	filters := []types.Filter{filter("tag-key", TagRun), filter("instance-state-name", cleanupStates...)}
	if !f.All {
		filters = append(filters, filter("tag:"+TagExperiment, f.Experiment))
	}
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
		// Checked again here: tag filters take wildcards, so an experiment named "a*" would
		// match others' instances.
		if tags[TagRun] == "" || (!f.All && tags[TagExperiment] != f.Experiment) {
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
