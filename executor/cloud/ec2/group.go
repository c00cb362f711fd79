package ec2

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Nomad's ports: HTTP, RPC and Serf, what the driver's address may reach on the run's
// instances.
const (
	NomadFirstPort = 4646
	NomadLastPort  = 4648
)

// DefaultGroupTimeout bounds how long a security group's deletion waits for the instances that
// hold it to finish shutting down: EC2 takes a minute or two to terminate one.
const DefaultGroupTimeout = 5 * time.Minute

// GroupName is the name of a run's security group: one name per run, so that a resumed driver
// finds the group an earlier one made rather than making a second (names are unique in a VPC).
func GroupName(run string) string { return "rubberband-" + run }

// GroupInUseError is a security group that live instances (pending to stopped) still use: it
// is kept, not waited for, since nothing ends them but a person, the run, or their watchdog.
type GroupInUseError struct {
	Group     string
	Instances []string
}

func (e *GroupInUseError) Error() string {
	return fmt.Sprintf("security group %s is kept: instance(s) %s still use it", e.Group, strings.Join(e.Instances, ", "))
}

// CreateGroup makes the run's own security group in the VPC of the spec's subnets, tagged as
// its instances are (experiment, run, the spec's tags), or finds the one an earlier driver of
// the run made; it lets in every protocol from the run's own instances (Nomad's ports, and a
// gang's workers on several nodes, whose torch.distributed ports are its own to pick) and
// Nomad's ports (TCP 4646-4648) from Config.DriverCIDRs, nothing else. Every instance a later
// Create rents joins it, beside the spec's own groups. It returns the group's ID.
func (p *Provider) CreateGroup(ctx context.Context) (string, error) {
	vpc, err := p.subnetsVPC(ctx)
	if err != nil {
		return "", fmt.Errorf("ec2: security group: %w", err)
	}
	name := GroupName(p.cfg.RunID)
	id, err := p.findOrCreateGroup(ctx, name, vpc)
	if err != nil {
		return "", fmt.Errorf("ec2: security group %s: %w", name, err)
	}
	perms := []types.IpPermission{{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(id)}}}}
	for _, c := range p.cfg.DriverCIDRs {
		perm := types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(NomadFirstPort), ToPort: aws.Int32(NomadLastPort)}
		if strings.Contains(c, ":") {
			perm.Ipv6Ranges = []types.Ipv6Range{{CidrIpv6: aws.String(c), Description: aws.String("rubberband driver: Nomad")}}
		} else {
			perm.IpRanges = []types.IpRange{{CidrIp: aws.String(c), Description: aws.String("rubberband driver: Nomad")}}
		}
		perms = append(perms, perm)
	}
	// One rule a call: a rule that exists (a resumed driver's) fails its whole call.
	for _, perm := range perms {
		_, err := p.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: []types.IpPermission{perm}})
		if err != nil && apiCode(err) != "InvalidPermission.Duplicate" {
			return "", fmt.Errorf("ec2: security group %s: authorize ingress: %w", id, err)
		}
	}
	p.mu.Lock()
	p.group = id
	p.mu.Unlock()
	return id, nil
}

// ownGroup is the run's group once CreateGroup made it, "" before.
func (p *Provider) ownGroup() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.group
}

// subnetsVPC is the one VPC of the spec's subnets: a security group belongs to one VPC, and
// only instances in its subnets can use it.
func (p *Provider) subnetsVPC(ctx context.Context) (string, error) {
	out, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: p.cfg.EC2.Subnets})
	if err != nil {
		return "", fmt.Errorf("find the VPC of subnets %s: %w", strings.Join(p.cfg.EC2.Subnets, ", "), err)
	}
	var vpcs []string
	for _, s := range out.Subnets {
		if v := aws.ToString(s.VpcId); !slices.Contains(vpcs, v) {
			vpcs = append(vpcs, v)
		}
	}
	if len(vpcs) != 1 {
		return "", fmt.Errorf("subnets %s are in %d VPCs (%s): a run's instances share one security group, so one VPC",
			strings.Join(p.cfg.EC2.Subnets, ", "), len(vpcs), strings.Join(vpcs, ", "))
	}
	return vpcs[0], nil
}

// findOrCreateGroup creates group name in vpc, or finds it when it exists and is this run's.
func (p *Provider) findOrCreateGroup(ctx context.Context, name, vpc string) (string, error) {
	var tv []types.Tag
	for _, kv := range withExtra([][2]string{{TagExperiment, p.cfg.Experiment}, {TagRun, p.cfg.RunID}, {tagName, name}}, p.cfg.EC2.Tags) {
		tv = append(tv, types.Tag{Key: aws.String(kv[0]), Value: aws.String(kv[1])})
	}
	out, err := p.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(name), VpcId: aws.String(vpc),
		Description:       aws.String(fmt.Sprintf("rubberband run %s of %s: its instances, and Nomad from its driver", p.cfg.RunID, p.cfg.Experiment)),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeSecurityGroup, Tags: tv}}})
	if err == nil {
		return aws.ToString(out.GroupId), nil
	}
	if apiCode(err) != "InvalidGroup.Duplicate" {
		return "", fmt.Errorf("create: %w", err)
	}
	found, err := describeGroups(ctx, p.ec2, filter("group-name", name), filter("vpc-id", vpc))
	if err != nil {
		return "", fmt.Errorf("find the existing group: %w", err)
	}
	for _, g := range found {
		if tagOf(g.Tags, TagRun) == p.cfg.RunID {
			return aws.ToString(g.GroupId), nil
		}
	}
	return "", fmt.Errorf("a group of that name exists in %s and is not this run's (tag %s)", vpc, TagRun)
}

// DeleteGroup deletes the run's security groups (tag rubberband:run) once no live instance uses
// them, retrying while the run's last instances shut down (EC2 refuses to delete a group an
// instance holds until it is terminated: DependencyViolation), for at most
// Config.GroupTimeout. A group that a pending, running or stopped instance uses is kept: the
// error wraps a *GroupInUseError (a driver that keeps its nodes, or stops to be resumed).
func (p *Provider) DeleteGroup(ctx context.Context) error {
	found, err := describeGroups(ctx, p.ec2, filter("tag:"+TagRun, p.cfg.RunID))
	if err != nil {
		return fmt.Errorf("ec2: find the run's security groups: %w", err)
	}
	var errs []error
	for _, g := range found {
		if tagOf(g.Tags, TagRun) == p.cfg.RunID { // a tag filter takes wildcards
			errs = append(errs, p.deleteGroup(ctx, aws.ToString(g.GroupId)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ec2: %w", err)
	}
	return nil
}

// deleteGroup deletes group id unless a live instance uses it (a *GroupInUseError), retrying
// while instances that are shutting down still hold it, for at most Config.GroupTimeout. A
// group that is gone already is not an error.
func (p *Provider) deleteGroup(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.GroupTimeout)
	defer cancel()
	wait := p.cfg.PollInterval
	for {
		users, err := p.describe(ctx, filter("instance.group-id", id), filter("instance-state-name", cleanupStates...))
		if err != nil {
			return fmt.Errorf("delete security group %s: find its instances: %w", id, err)
		}
		if len(users) > 0 {
			e := &GroupInUseError{Group: id}
			for _, in := range users {
				e.Instances = append(e.Instances, aws.ToString(in.InstanceId))
			}
			return e
		}
		_, err = p.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)})
		switch code := apiCode(err); {
		case err == nil, code == "InvalidGroup.NotFound":
			return nil
		case code != "DependencyViolation":
			return fmt.Errorf("delete security group %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete security group %s: its instances are still shutting down: %w", id, ctx.Err())
		case <-time.After(wait):
			wait = min(wait*3/2, 4*p.cfg.PollInterval)
		}
	}
}

// describeGroups is every security group matching filters, all pages.
func describeGroups(ctx context.Context, c *ec2.Client, filters ...types.Filter) ([]types.SecurityGroup, error) {
	pages := ec2.NewDescribeSecurityGroupsPaginator(c, &ec2.DescribeSecurityGroupsInput{Filters: filters, MaxResults: aws.Int32(1000)})
	var out []types.SecurityGroup
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.SecurityGroups...)
	}
	return out, nil
}

func tagOf(tags []types.Tag, key string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// HostCIDR is the one-address CIDR block of host, an IP address with or without a port (a
// Nomad server's RPC address): what a security group lets in from one machine.
func HostCIDR(host string) (string, error) {
	if ap, err := netip.ParseAddrPort(host); err == nil {
		host = ap.Addr().String()
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address: %w", host, err)
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String(), nil
}
