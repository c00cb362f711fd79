package nodeagent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Lookup reads an instance's own ID and address from its IMDSv2, at the endpoint the instance is
// given (here, the fake's per-instance IMDS, which the user-data writes down).
func TestLookupReadsIMDS(t *testing.T) {
	sim, err := ec2sim.Start(t.Context(), ec2sim.Config{BootDelay: 50 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	home := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(home, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(home, "credentials"))
	for k, v := range sim.ClientEnv() {
		t.Setenv(k, v)
	}
	out := filepath.Join(home, "endpoint")
	p, err := ec2.New(t.Context(), ec2.Config{RunID: "r20260101-000000-0000abcd", InstanceType: "t3.micro",
		EC2: spec.EC2{AMI: "ami-0123456789abcdef0", Subnets: []string{"subnet-0a0000000000000a1"}},
		UserData: func(string, ec2.Kind) (string, error) {
			return fmt.Sprintf("#!/bin/sh\necho \"$AWS_EC2_METADATA_SERVICE_ENDPOINT\" > %s\nexec sleep 300\n", out), nil
		}, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := p.Create(t.Context(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	var endpoint string
	for deadline := time.Now().Add(10 * time.Second); endpoint == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		endpoint = strings.TrimSpace(string(b))
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false") // as on the instance: the driver's env disables IMDS
	id, err := nodeagent.Lookup(t.Context(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if id.InstanceID != nodes[0].ID || id.Addr != "127.0.0.1" {
		t.Fatalf("looked up %+v, want %s on 127.0.0.1", id, nodes[0].ID)
	}
}
