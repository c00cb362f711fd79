package ec2_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// group is the fake's security group id.
func group(t *testing.T, s *ec2sim.Server, id string) ec2sim.SecurityGroup {
	t.Helper()
	for _, g := range s.SecurityGroups() {
		if g.ID == id {
			return g
		}
	}
	t.Fatalf("ec2sim has no security group %s", id)
	return ec2sim.SecurityGroup{}
}

// The run's security group: named after the run, tagged as its instances are, in the subnets'
// VPC, letting in every protocol from its own members and Nomad's ports from the driver only.
// A second provider of the same run (a resumed driver) finds it rather than making another;
// the run's instances sit in it beside the spec's groups, and with an instance profile their
// IMDS answers one hop further (a container's).
func TestCreateGroup(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	cfg.DriverCIDRs = []string{"192.0.2.7/32"}
	cfg.EC2.InstanceProfile = "rubberband-node"
	id, err := open(t, cfg).CreateGroup(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	g := group(t, s, id)
	want := map[string]string{rbec2.TagExperiment: "unit", rbec2.TagRun: cfg.RunID, "Name": rbec2.GroupName(cfg.RunID), "team": "ml"}
	for k, v := range want {
		if g.Tags[k] != v {
			t.Errorf("group tag %s = %q, want %q", k, g.Tags[k], v)
		}
	}
	rules := []ec2sim.Rule{{Protocol: "-1", FromPort: -1, ToPort: -1, Group: id},
		{Protocol: "tcp", FromPort: rbec2.NomadFirstPort, ToPort: rbec2.NomadLastPort, CIDR: "192.0.2.7/32"}}
	if g.Name != rbec2.GroupName(cfg.RunID) || !slices.Equal(g.Ingress, rules) {
		t.Fatalf("group %+v, want rules %+v", g, rules)
	}

	resumed := open(t, cfg)
	again, err := resumed.CreateGroup(t.Context())
	if err != nil || again != id || len(s.SecurityGroups()) != 1 || !slices.Equal(group(t, s, id).Ingress, rules) {
		t.Fatalf("a resumed driver's group %s (%v), first %s; groups %+v", again, err, id, s.SecurityGroups())
	}
	nodes, err := resumed.Create(t.Context(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := instance(t, s, nodes[0].ID)
	if !slices.Equal(in.SecurityGroups, append(slices.Clone(cfg.EC2.SecurityGroups), id)) || in.InstanceProfile != "rubberband-node" {
		t.Errorf("instance in groups %v with profile %q", in.SecurityGroups, in.InstanceProfile)
	}
	for _, c := range runCalls(s) {
		if c.Params["MetadataOptions.HttpPutResponseHopLimit"] != "2" || c.Params["MetadataOptions.HttpTokens"] != "required" {
			t.Errorf("RunInstances metadata options %v", c.Params)
		}
	}

	other := config() // a name of this run's taken by another run's group is not adopted
	other.RunID = cfg.RunID + "x"
	if _, err := ec2.NewFromConfig(awsConfig(t)).CreateSecurityGroup(t.Context(), &ec2.CreateSecurityGroupInput{
		GroupName: aws.String(rbec2.GroupName(other.RunID)), Description: aws.String("not rubberband's")}); err != nil {
		t.Fatal(err)
	}
	_, err = open(t, other).CreateGroup(t.Context())
	mustContain(t, err, "not this run's")
}

// DeleteGroup keeps a group while an instance of the run lives (a *GroupInUseError), and once
// the instances are terminated it deletes it, retrying while they still shut down (EC2's
// DependencyViolation). A run without a group deletes nothing, and that is no error.
func TestDeleteGroup(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	// Ignores SIGTERM, once it says so: its instance shuts down for the fake's kill grace.
	cfg.UserData = func(string, rbec2.Kind) (string, error) {
		return "#!/bin/sh\ntrap '' TERM\necho ignoring\nwhile :; do sleep 1; done\n", nil
	}
	p := open(t, cfg)
	if err := p.DeleteGroup(t.Context()); err != nil {
		t.Fatalf("no group: %v", err)
	}
	id, err := p.CreateGroup(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := p.Create(t.Context(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = p.DeleteGroup(t.Context())
	var inUse *rbec2.GroupInUseError
	if !errors.As(err, &inUse) || inUse.Group != id || !slices.Equal(inUse.Instances, []string{nodes[0].ID}) {
		t.Fatalf("with a running instance: %v", err)
	}
	in := instance(t, s, nodes[0].ID)
	waitFor(t, "the instance to ignore SIGTERM", func() bool { return strings.Contains(consoleLog(in), "ignoring\n") })
	if err := p.Delete(t.Context(), []string{nodes[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteGroup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(s.SecurityGroups()) != 0 || instance(t, s, nodes[0].ID).State != ec2sim.StateTerminated {
		t.Fatalf("left %+v; the instance %s", s.SecurityGroups(), instance(t, s, nodes[0].ID).State)
	}
	retried := false
	for _, c := range s.Calls() {
		retried = retried || (c.Action == "DeleteSecurityGroup" && c.Error == "DependencyViolation")
	}
	if !retried {
		t.Error("the group was never refused while its instance shut down: the retry is untested")
	}
}

// CleanupGroups picks the runs' groups of one experiment (or all), never a group without
// rubberband's run tag nor another experiment's, lists them on a dry run, deletes them
// otherwise, and keeps (saying so) one a live instance still uses.
func TestCleanupGroups(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	mk := func(experiment string) (*rbec2.Provider, string) {
		cfg := config()
		cfg.Experiment = experiment
		p := open(t, cfg)
		id, err := p.CreateGroup(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return p, id
	}
	_, a1 := mk("exp")
	busy, a2 := mk("exp")
	_, b := mk("expo") // a wildcard exp* would match it
	if _, err := ec2.NewFromConfig(awsConfig(t)).CreateSecurityGroup(t.Context(), &ec2.CreateSecurityGroupInput{
		GroupName: aws.String("someone-elses"), Description: aws.String("not rubberband's")}); err != nil {
		t.Fatal(err)
	}
	nodes, err := busy.Create(t.Context(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(gs []rbec2.Group) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.ID)
		}
		slices.Sort(out)
		return out
	}
	f := rbec2.Filter{Experiment: "exp"}
	found, err := rbec2.CleanupGroups(t.Context(), awsConfig(t), f, true)
	if err != nil || !slices.Equal(ids(found), ids([]rbec2.Group{{ID: a1}, {ID: a2}})) || len(s.SecurityGroups()) != 4 {
		t.Fatalf("dry run: %+v %v", found, err)
	}
	deleted, err := rbec2.CleanupGroups(t.Context(), awsConfig(t), f, false)
	var inUse *rbec2.GroupInUseError
	if !errors.As(err, &inUse) || inUse.Group != a2 || !slices.Equal(ids(deleted), []string{a1}) {
		t.Fatalf("deleted %+v, err %v; want %s deleted and %s kept for %s", deleted, err, a1, a2, nodes[0].ID)
	}
	if err := busy.Delete(t.Context(), []string{nodes[0].ID}); err != nil {
		t.Fatal(err)
	}
	deleted, err = rbec2.CleanupGroups(t.Context(), awsConfig(t), rbec2.Filter{All: true}, false)
	if err != nil || !slices.Equal(ids(deleted), ids([]rbec2.Group{{ID: a2}, {ID: b}})) {
		t.Fatalf("--all: %+v %v", deleted, err)
	}
	if left := s.SecurityGroups(); len(left) != 1 || left[0].Name != "someone-elses" {
		t.Fatalf("left %+v", left)
	}
}

// HostCIDR is one address of the Nomad leader's RPC address, IPv4 or IPv6, port or not.
func TestHostCIDR(t *testing.T) {
	for in, want := range map[string]string{"10.1.2.3:4647": "10.1.2.3/32", "10.1.2.3": "10.1.2.3/32", "[2001:db8::7]:4647": "2001:db8::7/128",
		"2001:db8::7": "2001:db8::7/128", "[::ffff:10.0.0.1]:4647": "10.0.0.1/32"} {
		if got, err := rbec2.HostCIDR(in); err != nil || got != want {
			t.Errorf("HostCIDR(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := rbec2.HostCIDR("nomad.internal:4647"); err == nil {
		t.Error("a host name: no error")
	}
}
