package ec2_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

const (
	testAMI       = "ami-0123456789abcdef0"
	testType      = "p3.2xlarge" // 8 vCPUs, quota L-417A185B on-demand
	onDemandPrice = 3.06
	spotPrice     = 0.918
	subnetA       = "subnet-0a0000000000000a1" // us-east-1a in ec2sim's defaults
	subnetB       = "subnet-0b0000000000000b2" // us-east-1b
)

// startSim starts a fake EC2 for one test and points the SDK's default chain at it, with
// nothing of the machine's own AWS configuration let in.
func startSim(t *testing.T, cfg ec2sim.Config) *ec2sim.Server {
	t.Helper()
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 300 * time.Millisecond
	}
	s := ec2sim.StartForTest(t, cfg)
	return s
}

var runs atomic.Int64

// config is an on-demand p3.2xlarge run of its own (a fresh run ID), in both default subnets,
// whose instances echo their node name and then idle until terminated.
func config() rbec2.Config {
	return rbec2.Config{
		Experiment:    "unit",
		RunID:         fmt.Sprintf("r20250101-000000-%08x", runs.Add(1)),
		InstanceType:  testType,
		GPUsPerNode:   1,
		Market:        cloud.OnDemand,
		OnDemandPrice: onDemandPrice,
		SpotPrice:     spotPrice,
		EC2: spec.EC2{AMI: testAMI, Subnets: []string{subnetA, subnetB}, SecurityGroups: []string{"sg-0123456789abcdef0"},
			Tags: map[string]string{"team": "ml"}},
		UserData:     script,
		PollInterval: 20 * time.Millisecond,
		MaxBackoff:   20 * time.Millisecond,
	}
}

// script is user-data that runs in the foreground, as the Nomad agent will: in ec2sim, as on
// an instance whose watchdog shuts it down, the instance ends when its user-data does.
func script(node string, _ rbec2.Kind) (string, error) {
	return fmt.Sprintf("#!/bin/sh\nRB_NODE='%s'\necho node $RB_NODE\nexec sleep 300\n", node), nil
}

func open(t *testing.T, cfg rbec2.Config) *rbec2.Provider {
	t.Helper()
	p, err := rbec2.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // nothing a test rents outlives it
		if held, err := p.List(context.Background()); err == nil && len(held) > 0 {
			ids := make([]string, len(held))
			for i, n := range held {
				ids[i] = n.ID
			}
			_ = p.Delete(context.Background(), ids)
		}
	})
	return p
}

// runCalls are the RunInstances requests the fake answered, dry runs left out.
func runCalls(s *ec2sim.Server) []ec2sim.Call {
	var out []ec2sim.Call
	for _, c := range s.Calls() {
		if c.Action == "RunInstances" && c.Params["DryRun"] != "true" {
			out = append(out, c)
		}
	}
	return out
}

// alive are the instances that are pending or running.
func alive(s *ec2sim.Server) []ec2sim.Instance {
	var out []ec2sim.Instance
	for _, in := range s.Instances() {
		if in.State == ec2sim.StatePending || in.State == ec2sim.StateRunning {
			out = append(out, in)
		}
	}
	return out
}

func instance(t *testing.T, s *ec2sim.Server, id string) ec2sim.Instance {
	t.Helper()
	for _, in := range s.Instances() {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("ec2sim has no instance %s", id)
	return ec2sim.Instance{}
}

// waitFor polls cond for up to a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func consoleLog(in ec2sim.Instance) string {
	b, _ := os.ReadFile(filepath.Join(in.Dir, "console.log"))
	return string(b)
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one saying %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}
