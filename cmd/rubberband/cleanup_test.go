package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

var cleanupRuns atomic.Int64

// rentConfig is a run of experiment (a fresh run ID) that rents on-demand p3.2xlarge instances
// that idle.
func rentConfig(experiment string) rbec2.Config {
	return rbec2.Config{
		Experiment: experiment, RunID: fmt.Sprintf("r-cleanup-%d", cleanupRuns.Add(1)), InstanceType: "p3.2xlarge", GPUsPerNode: 1,
		OnDemandPrice: 3.06, EC2: spec.EC2{AMI: "ami-0123456789abcdef0", Subnets: []string{"subnet-0a0000000000000a1", "subnet-0b0000000000000b2"}},
		UserData:     func(string, rbec2.Kind) (string, error) { return "#!/bin/sh\nexec sleep 300\n", nil },
		PollInterval: 20 * time.Millisecond,
	}
}

// rent rents n on-demand p3.2xlarge instances for experiment through the EC2 provider, tagged
// as a run of it, in the run's own security group, and returns their IDs.
func rent(t *testing.T, experiment string, n int) []string {
	t.Helper()
	p, err := rbec2.New(t.Context(), rentConfig(experiment))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.CreateGroup(t.Context()); err != nil {
		t.Fatal(err)
	}
	nodes, err := p.Create(t.Context(), cloud.Request{Count: n})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(nodes))
	for i, nd := range nodes {
		ids[i] = nd.ID
	}
	return ids
}

// rentUntagged rents an instance that is not rubberband's, through the SDK.
func rentUntagged(t *testing.T) string {
	t.Helper()
	cfg, err := rbec2.LoadConfig(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := ec2.NewFromConfig(cfg).RunInstances(t.Context(), &ec2.RunInstancesInput{ImageId: aws.String("ami-0123456789abcdef0"),
		InstanceType: types.InstanceTypeP32xlarge, MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String("subnet-0a0000000000000a1")})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}

// liveIDs are the fake's instances that are neither shutting down nor terminated, sorted.
func liveIDs(s *ec2sim.Server) []string {
	var out []string
	for _, in := range s.Instances() {
		if in.State != ec2sim.StateShuttingDown && in.State != ec2sim.StateTerminated {
			out = append(out, in.ID)
		}
	}
	slices.Sort(out)
	return out
}

func sortedIDs(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// cleanup without --yes on a non-terminal lists what it would terminate and refuses (exit 2);
// with --yes it terminates exactly the experiment's instances and deletes its runs' security
// groups, and lists them; --all -o json terminates every rubberband instance and group. An
// untagged instance survives it all.
func TestCleanupEC2(t *testing.T) {
	s, env := startEC2Sim(t)
	mine, other, untagged := rent(t, "cli-exp", 2), rent(t, "other-exp", 1), rentUntagged(t)
	everything := liveIDs(s)

	out, errOut, code := rbEnv(t, binary, env, "cleanup", "--backend", "ec2", "--experiment", "cli-exp")
	if code != 2 || out != "" || !strings.Contains(errOut, "add --yes to terminate these 2 instances and 1 security group of experiment cli-exp") {
		t.Fatalf("without --yes: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	for _, id := range mine {
		if !strings.Contains(errOut, id) {
			t.Errorf("the refusal does not list %s:\n%s", id, errOut)
		}
	}
	if got := liveIDs(s); !slices.Equal(got, everything) {
		t.Fatalf("a refused cleanup terminated something: live %v, was %v", got, everything)
	}

	out, errOut, code = rbEnv(t, binary, env, "cleanup", "--backend", "ec2", "--experiment", "cli-exp", "--yes")
	if code != 0 || !strings.Contains(out, "terminated 2 instances of experiment cli-exp in us-east-1") ||
		!strings.Contains(out, "deleted 1 security group of experiment cli-exp in us-east-1") {
		t.Fatalf("--yes: exit %d:\n%s%s", code, out, errOut)
	}
	if groups := s.SecurityGroups(); len(groups) != 1 || groups[0].Tags[rbec2.TagExperiment] != "other-exp" {
		t.Fatalf("groups after the cleanup of cli-exp: %+v; want other-exp's", groups)
	}
	for _, id := range mine {
		if !strings.Contains(lineWith(out, id), "cli-exp") || !strings.Contains(lineWith(out, id), "running") {
			t.Errorf("the table lacks %s as a running instance of cli-exp:\n%s", id, out)
		}
	}
	if got := liveIDs(s); !slices.Equal(got, sortedIDs(append(other, untagged)...)) {
		t.Fatalf("live after the cleanup of cli-exp: %v; want %v and %s", got, other, untagged)
	}

	out, errOut, code = rbEnv(t, binary, env, "cleanup", "--backend", "ec2", "--all", "--yes", "-o", "json")
	var res struct {
		Region     string `json:"region"`
		All        bool   `json:"all"`
		Terminated []struct {
			ID, Experiment, Run, State, Zone, Market string
		} `json:"terminated"`
		Groups []struct {
			ID, Experiment string
		} `json:"security_groups"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("--all -o json: exit %d:\n%s%s", code, out, errOut)
	}
	if !res.All || res.Region != "us-east-1" || len(res.Terminated) != 1 || res.Terminated[0].ID != other[0] ||
		res.Terminated[0].Experiment != "other-exp" || res.Terminated[0].State != "running" || res.Terminated[0].Market != "on-demand" ||
		len(res.Groups) != 1 || res.Groups[0].Experiment != "other-exp" || len(s.SecurityGroups()) != 0 {
		t.Fatalf("--all -o json: %+v", res)
	}
	if got := liveIDs(s); !slices.Equal(got, []string{untagged}) {
		t.Fatalf("live after --all: %v; want only the untagged %s", got, untagged)
	}
	out, errOut, code = rbEnv(t, binary, env, "cleanup", "--backend", "ec2", "--all")
	if code != 0 || !strings.Contains(out, "no rubberband instances of every experiment in us-east-1: nothing to terminate") {
		t.Fatalf("nothing left: exit %d:\n%s%s", code, out, errOut)
	}
}

// Bad arguments exit 2 with what is wrong, and ask AWS nothing.
func TestCleanupBadArguments(t *testing.T) {
	s, env := startEC2Sim(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cleanup", "--experiment", "x", "--yes"}, "cleanup needs --backend ec2"}, // RUBBERBAND_BACKEND is empty here
		{[]string{"cleanup", "--backend", "local", "--experiment", "x", "--yes"}, "local runs release their nodes themselves"},
		{[]string{"cleanup", "--backend", "nomad", "--all"}, "`rubberband cancel RUN`"},
		{[]string{"cleanup", "--backend", "gce", "--all"}, `--backend "gce" is not a backend cleanup knows`},
		{[]string{"cleanup", "--backend", "ec2"}, "exactly one of --experiment NAME and --all"},
		{[]string{"cleanup", "--backend", "ec2", "--experiment", "x", "--all"}, "exactly one of --experiment NAME and --all"},
		{[]string{"cleanup", "--backend", "ec2", "--all", "extra"}, "takes no arguments"},
		{[]string{"cleanup", "--backend", "ec2", "--all", "--region", "moon-1"}, `--region "moon-1"`},
		{[]string{"cleanup", "--backend", "ec2", "--all", "-o", "csv"}, `--output "csv"`},
	} {
		out, errOut, code := rbEnv(t, binary, env, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, out, errOut, c.want)
		}
	}
	if calls := s.Calls(); len(calls) != 0 {
		t.Errorf("bad arguments made %d calls to AWS, the first %s", len(calls), calls[0].Action)
	}
}
