package ec2_test

import (
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// Preflight passes on a launchable configuration with quota to spare, and says what would fail
// otherwise: launching not allowed, an AMI that does not exist, a subnet that does not, a vCPU
// quota too small for the plan. It never rents.
func TestPreflight(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(s *ec2sim.Server, cfg *rbec2.Config)
		want  []string // what the error says; none: no error
	}{
		{"ok", func(*ec2sim.Server, *rbec2.Config) {}, nil},
		{"denied", func(s *ec2sim.Server, _ *rbec2.Config) { s.Deny("RunInstances", true) },
			[]string{"may not launch instances", "ec2:RunInstances", "UnauthorizedOperation"}},
		{"no such AMI", func(_ *ec2sim.Server, cfg *rbec2.Config) { cfg.EC2.AMI = "ami-0fffffffffffffff0" },
			[]string{"cluster.ec2.ami", "InvalidAMIID.NotFound"}},
		{"no such subnet", func(_ *ec2sim.Server, cfg *rbec2.Config) {
			cfg.EC2.Subnets = append(cfg.EC2.Subnets, "subnet-0c0000000000000c3")
		}, []string{"subnet-0c0000000000000c3", "InvalidSubnetID.NotFound"}},
		{"quota", func(s *ec2sim.Server, _ *rbec2.Config) { s.SetQuota(ec2sim.QuotaOnDemandP, 16) },
			[]string{"L-417A185B", "is 16 vCPUs", "4 p3.2xlarge nodes of 8 vCPUs = 32"}},
		{"spot quota", func(s *ec2sim.Server, cfg *rbec2.Config) {
			s.SetQuota(ec2sim.QuotaSpotP, 24)
			cfg.Market = "spot"
		}, []string{"L-7212CCBC", "is 24 vCPUs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startSim(t, ec2sim.Config{Images: []string{testAMI}})
			cfg := config()
			c.setup(s, &cfg)
			err := open(t, cfg).Preflight(t.Context(), []rbec2.Need{{Nodes: 4}})
			if c.want == nil && err != nil {
				t.Fatal(err)
			}
			if c.want != nil {
				mustContain(t, err, c.want...)
				t.Log(err)
			}
			if len(s.Instances()) != 0 {
				t.Fatalf("preflight rented %d instances", len(s.Instances()))
			}
		})
	}
}

// With several types, every type is dry-run, and a quota is compared with what all the needs
// that count against it take together: 2 p3.2xlarge (16 vCPUs) and 1 p3.8xlarge (32) fit
// neither a P quota of 40 alone, and the error says both; the G type counts against another.
func TestPreflightTypes(t *testing.T) {
	s := startSim(t, ec2sim.Config{Images: []string{testAMI}})
	s.SetQuota(ec2sim.QuotaOnDemandP, 40)
	cfg := config()
	cfg.More = []rbec2.Kind{g3, {InstanceType: "p3.8xlarge", GPUsPerNode: 4, OnDemandPrice: 12.24}}
	p := open(t, cfg)
	needs := []rbec2.Need{{Nodes: 2}, {InstanceType: "p3.8xlarge", Market: cloud.OnDemand, Nodes: 1}, {InstanceType: g3.InstanceType, Nodes: 3}}
	err := p.Preflight(t.Context(), needs)
	mustContain(t, err, "L-417A185B", "is 40 vCPUs", "2 p3.2xlarge nodes of 8 vCPUs + 1 p3.8xlarge nodes of 32 vCPUs = 48")
	if strings.Contains(err.Error(), g3.InstanceType) {
		t.Errorf("the G type counted against the P quota: %v", err)
	}
	dry := map[string]int{}
	for _, c := range s.Calls() {
		if c.Action == "RunInstances" && c.Params["DryRun"] == "true" {
			dry[c.Params["InstanceType"]]++
		}
	}
	if dry[testType] != 2 || dry[g3.InstanceType] != 2 || dry["p3.8xlarge"] != 2 {
		t.Errorf("dry runs by type %v, want each type in both subnets", dry)
	}
	if err := p.Preflight(t.Context(), needs[:1]); err != nil {
		t.Errorf("2 p3.2xlarge within a quota of 40: %v", err)
	}
	if len(s.Instances()) != 0 {
		t.Fatalf("preflight rented %d instances", len(s.Instances()))
	}
}
