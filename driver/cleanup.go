package driver

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/format"
)

// CleanupResult is what `rubberband cleanup` terminated and deleted in a region (its JSON).
type CleanupResult struct {
	Region     string         `json:"region"`
	Experiment string         `json:"experiment,omitempty"`
	All        bool           `json:"all,omitempty"`
	Terminated []ec2.Instance `json:"terminated"`
	// Groups are the runs' security groups it deleted.
	Groups []ec2.Group `json:"security_groups"`
}

// CleanupFound is what a cleanup of f would terminate and delete in cfg's region, ending
// nothing (dry runs of ec2.Cleanup and ec2.CleanupGroups).
func CleanupFound(ctx context.Context, cfg aws.Config, f ec2.Filter) ([]ec2.Instance, []ec2.Group, error) {
	found, err := ec2.Cleanup(ctx, cfg, f, true)
	if err != nil {
		return nil, nil, err
	}
	groups, err := ec2.CleanupGroups(ctx, cfg, f, true)
	if err != nil {
		return nil, nil, err
	}
	return found, groups, nil
}

// Confirmed narrows f to the instances and groups a person confirmed (CleanupFound's), not
// what was rented or made since.
func Confirmed(f ec2.Filter, insts []ec2.Instance, groups []ec2.Group) ec2.Filter {
	f.IDs, f.Groups = make([]string, len(insts)), make([]string, len(groups))
	for i, in := range insts {
		f.IDs[i] = in.ID
	}
	for i, g := range groups {
		f.Groups[i] = g.ID
	}
	return f
}

// Cleanup terminates the instances f picks in cfg's region, then deletes their runs' security
// groups once the instances have let go of them. An error terminating the instances comes
// alone, with no result; one deleting the groups comes with what was ended before it.
func Cleanup(ctx context.Context, cfg aws.Config, f ec2.Filter) (*CleanupResult, error) {
	done, err := ec2.Cleanup(ctx, cfg, f, false)
	if err != nil {
		return nil, err
	}
	res := &CleanupResult{Region: cfg.Region, Experiment: f.Experiment, All: f.All, Terminated: append([]ec2.Instance{}, done...), Groups: []ec2.Group{}}
	gone, err := ec2.CleanupGroups(ctx, cfg, f, false)
	res.Groups = append(res.Groups, gone...)
	return res, err
}

// WriteCleanup says what a cleanup of what (an experiment, every experiment) ended: its
// instances and groups as tables, or that there was nothing to terminate.
func WriteCleanup(w io.Writer, res CleanupResult, what string) {
	if len(res.Terminated) == 0 {
		fmt.Fprintf(w, "no rubberband instances of %s in %s: nothing to terminate\n", what, res.Region)
	} else {
		WriteInstances(w, res.Terminated, "WAS")
		fmt.Fprintf(w, "terminated %s of %s in %s\n", format.Plural(len(res.Terminated), "instance"), what, res.Region)
	}
	if len(res.Groups) > 0 {
		WriteGroups(w, res.Groups)
		fmt.Fprintf(w, "deleted %s of %s in %s\n", format.Plural(len(res.Groups), "security group"), what, res.Region)
	}
}

// WriteGroups is a table of the runs' security groups.
func WriteGroups(w io.Writer, groups []ec2.Group) {
	t := format.NewTable(w, "SECURITY GROUP", "NAME", "VPC", "EXPERIMENT", "RUN")
	for _, g := range groups {
		t.Row(g.ID, g.Name, g.VpcID, g.Experiment, g.Run)
	}
	t.Flush()
}

// WriteInstances is a table of instances; state names the column of the state they were found
// in.
func WriteInstances(w io.Writer, insts []ec2.Instance, state string) {
	t := format.NewTable(w, "INSTANCE", "TYPE", "ZONE", "MARKET", "EXPERIMENT", "RUN", "LAUNCHED", state)
	for _, in := range insts {
		t.Row(in.ID, in.Type, in.Zone, in.Market, in.Experiment, in.Run, format.Ago(in.LaunchTime, time.Now()), in.State)
	}
	t.Flush()
}
