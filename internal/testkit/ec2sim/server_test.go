package ec2sim

import (
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestStartChecksConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"region":         {Region: "mars"},
		"subnet id":      {Subnets: map[string]string{"net-1": "us-east-1a"}},
		"zone of region": {Subnets: map[string]string{"subnet-0a0000000000000a1": "eu-west-1a"}},
		"image":          {Images: []string{"ubuntu"}},
	} {
		if s, err := Start(t.Context(), cfg); err == nil {
			s.Close()
			t.Errorf("%s: started", name)
		}
	}
	s, err := Start(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %s", s.URL())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left its temporary directory: %v", err)
	}
}

func TestSigningScope(t *testing.T) {
	_, c := start(t, Config{})
	// Another region's client signs for that region: this endpoint is us-east-1's.
	west := ec2.New(c.ec2.Options(), func(o *ec2.Options) { o.Region = "us-west-2" })
	if _, err := west.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{}); apiCode(err) != "AuthFailure" {
		t.Errorf("a us-west-2 client: %v", err)
	}
	if _, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("a us-east-1 client: %v", err)
	}
}

func TestPlacementByZone(t *testing.T) {
	s, c := start(t, Config{})
	in := runInput("")
	in.SubnetId = nil
	in.Placement = &types.Placement{AvailabilityZone: aws.String("us-east-1b")}
	out, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(out.Instances[0].SubnetId); got != "subnet-0b0000000000000b2" {
		t.Errorf("subnet %s for zone us-east-1b", got)
	}
	in = runInput("")
	in.Placement = &types.Placement{AvailabilityZone: aws.String("us-east-1b")}
	if _, err := c.ec2.RunInstances(t.Context(), in); apiCode(err) != "InvalidParameterCombination" {
		t.Errorf("a subnet in another zone than asked: %v", err)
	}
	if n := len(s.Instances()); n != 1 {
		t.Errorf("%d instances", n)
	}
}

func TestRebalanceRecommendation(t *testing.T) {
	s, c := start(t, Config{})
	out, err := c.ec2.RunInstances(t.Context(), spotInput(""))
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	snap := waitState(t, s, id, StateRunning)
	md := imds.New(imds.Options{Endpoint: snap.IMDS + "/", ClientEnableState: imds.ClientEnabled})
	if _, err := metadata(t.Context(), md, "events/recommendations/rebalance"); err == nil {
		t.Error("a rebalance recommendation before any")
	}
	if err := s.RecommendRebalance(id); err != nil {
		t.Fatal(err)
	}
	if got, err := metadata(t.Context(), md, "events/recommendations/rebalance"); err != nil || !strings.HasPrefix(got, `{"noticeTime":"`) {
		t.Errorf("rebalance: %q, %v", got, err)
	}
	if got, err := metadata(t.Context(), md, "instance-life-cycle"); got != "spot" {
		t.Errorf("instance-life-cycle %q, %v", got, err)
	}
	if _, err := metadata(t.Context(), md, "spot/instance-action"); err == nil {
		t.Error("a recommendation is not an interruption")
	}
	if st := s.Instances()[0].State; st != StateRunning {
		t.Errorf("recommended and %s", st)
	}
}
