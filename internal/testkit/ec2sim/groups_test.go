package ec2sim

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// A security group's life through the real SDK: made in the subnets' VPC with its tags, a
// name used twice refused, rules authorized once (a repeat is InvalidPermission.Duplicate),
// described with its rules by a tag filter; an instance launched into it holds it: deleting it
// is a DependencyViolation while the instance runs and while it shuts down, and succeeds once
// it is terminated; then the group is gone, for DescribeSecurityGroups and RunInstances alike.
// Every call is recorded by its IAM action.
func TestSecurityGroupLifecycle(t *testing.T) {
	s, c := start(t, Config{KillGrace: time.Second})
	ctx := t.Context()
	subnets, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0b0000000000000b2"}})
	if err != nil || len(subnets.Subnets) != 1 {
		t.Fatalf("DescribeSubnets: %v %+v", err, subnets)
	}
	sub := subnets.Subnets[0]
	if aws.ToString(sub.VpcId) != vpcID || aws.ToString(sub.AvailabilityZone) != "us-east-1b" {
		t.Fatalf("subnet %+v", sub)
	}
	if _, err := c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0c0000000000000c3"}}); apiCode(err) != "InvalidSubnetID.NotFound" {
		t.Fatalf("an unknown subnet: %v", err)
	}

	tags := []types.TagSpecification{{ResourceType: types.ResourceTypeSecurityGroup, Tags: []types.Tag{{Key: aws.String("rubberband:run"), Value: aws.String("r1")}}}}
	create := &ec2.CreateSecurityGroupInput{GroupName: aws.String("rubberband-r1"), Description: aws.String("run r1"), VpcId: sub.VpcId, TagSpecifications: tags}
	made, err := c.ec2.CreateSecurityGroup(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(made.GroupId)
	if !sgRE.MatchString(id) || len(made.Tags) != 1 {
		t.Fatalf("made %+v", made)
	}
	if _, err := c.ec2.CreateSecurityGroup(ctx, create); apiCode(err) != "InvalidGroup.Duplicate" {
		t.Fatalf("the same name again: %v", err)
	}
	badTags := *create
	badTags.GroupName, badTags.TagSpecifications = aws.String("other"), []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tags[0].Tags}}
	if _, err := c.ec2.CreateSecurityGroup(ctx, &badTags); apiCode(err) != "InvalidParameterValue" {
		t.Fatalf("instance tags on a group: %v", err)
	}

	perms := []types.IpPermission{
		{IpProtocol: aws.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String(id)}}},
		{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(4646), ToPort: aws.Int32(4648), IpRanges: []types.IpRange{{CidrIp: aws.String("10.0.0.5/32")}}},
	}
	if _, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String(id), IpPermissions: perms}); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]*ec2.AuthorizeSecurityGroupIngressInput{
		"InvalidPermission.Duplicate": {GroupId: aws.String(id), IpPermissions: perms[1:]},
		"InvalidGroup.NotFound": {GroupId: aws.String(id), IpPermissions: []types.IpPermission{{IpProtocol: aws.String("-1"),
			UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: aws.String("sg-0123456789abcdef0")}}}}},
		"InvalidParameterValue": {GroupId: aws.String(id), IpPermissions: []types.IpPermission{{IpProtocol: aws.String("tcp"),
			FromPort: aws.Int32(4648), ToPort: aws.Int32(4646), IpRanges: perms[1].IpRanges}}},
	} {
		if _, err := c.ec2.AuthorizeSecurityGroupIngress(ctx, in); apiCode(err) != name {
			t.Errorf("want %s: %v", name, err)
		}
	}
	desc, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []types.Filter{
		{Name: aws.String("tag:rubberband:run"), Values: []string{"r1"}}, {Name: aws.String("vpc-id"), Values: []string{vpcID}}}})
	if err != nil || len(desc.SecurityGroups) != 1 {
		t.Fatalf("DescribeSecurityGroups: %v %+v", err, desc)
	}
	g := desc.SecurityGroups[0]
	if aws.ToString(g.GroupId) != id || aws.ToString(g.GroupName) != "rubberband-r1" || len(g.IpPermissions) != 2 || len(g.IpPermissionsEgress) != 1 {
		t.Fatalf("described %+v", g)
	}
	self, nomad := g.IpPermissions[0], g.IpPermissions[1]
	if aws.ToString(self.IpProtocol) != "-1" || len(self.UserIdGroupPairs) != 1 || aws.ToString(self.UserIdGroupPairs[0].GroupId) != id ||
		aws.ToString(nomad.IpProtocol) != "tcp" || aws.ToInt32(nomad.FromPort) != 4646 || aws.ToInt32(nomad.ToPort) != 4648 ||
		len(nomad.IpRanges) != 1 || aws.ToString(nomad.IpRanges[0].CidrIp) != "10.0.0.5/32" {
		t.Fatalf("rules %+v", g.IpPermissions)
	}

	// An instance holds the group until it is terminated; this one takes its kill grace to
	// shut down (it ignores SIGTERM, once it says so).
	in := runInput("#!/bin/sh\ntrap '' TERM\necho yes > ignoring.tmp && mv ignoring.tmp ignoring\nwhile :; do sleep 1; done\n")
	in.SecurityGroupIds = []string{id, "sg-0123456789abcdef0"} // beside a group the fake did not make
	out, err := c.ec2.RunInstances(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	inst := aws.ToString(out.Instances[0].InstanceId)
	waitFile(t, filepath.Join(s.Dir(), inst, "root", "ignoring"), 10*time.Second)
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); apiCode(err) != "DependencyViolation" {
		t.Fatalf("delete while an instance runs in it: %v", err)
	}
	if _, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); apiCode(err) != "DependencyViolation" {
		t.Fatalf("delete while its instance shuts down: %v", err)
	}
	waitState(t, s, inst, StateTerminated)
	if _, err := c.ec2.DeleteSecurityGroup(ctx, &ec2.DeleteSecurityGroupInput{GroupId: aws.String(id)}); err != nil {
		t.Fatalf("delete once its instance is terminated: %v", err)
	}
	if len(s.SecurityGroups()) != 0 {
		t.Fatalf("left %+v", s.SecurityGroups())
	}
	if _, err := c.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{id}}); apiCode(err) != "InvalidGroup.NotFound" {
		t.Fatalf("describe a deleted group: %v", err)
	}
	in.SecurityGroupIds = []string{id}
	if _, err := c.ec2.RunInstances(ctx, in); apiCode(err) != "InvalidGroup.NotFound" {
		t.Fatalf("launch into a deleted group: %v", err)
	}
	for _, want := range []string{"ec2:AuthorizeSecurityGroupIngress", "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:RunInstances"} {
		if !slices.Contains(s.Actions(), want) {
			t.Errorf("Actions %v lack %s", s.Actions(), want)
		}
	}
}

// Groups page in creation order, a token naming the last one given, as instances do.
func TestDescribeSecurityGroupsPages(t *testing.T) {
	_, c := start(t, Config{})
	var want []string
	for i := range 7 {
		out, err := c.ec2.CreateSecurityGroup(t.Context(), &ec2.CreateSecurityGroupInput{GroupName: aws.String("g" + string(rune('a'+i))), Description: aws.String("d")})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, aws.ToString(out.GroupId))
	}
	var got []string
	pages := ec2.NewDescribeSecurityGroupsPaginator(c.ec2, &ec2.DescribeSecurityGroupsInput{MaxResults: aws.Int32(5)})
	for n := 0; pages.HasMorePages(); n++ {
		page, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range page.SecurityGroups {
			got = append(got, aws.ToString(g.GroupId))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
}
