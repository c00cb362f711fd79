package ec2_test

import (
	"testing"

	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/ec2sim"
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
			err := open(t, cfg).Preflight(t.Context(), 4)
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
