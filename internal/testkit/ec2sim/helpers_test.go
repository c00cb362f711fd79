package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/smithy-go"
)

const testAMI = "ami-0123456789abcdef0"

// clients are the real SDK clients a test talks to the fake with.
type clients struct {
	ec2     *ec2.Client
	pricing *pricing.Client
	quotas  *servicequotas.Client
}

// start starts a fake for one test and points the SDK at it the way the provider will be:
// credentials, region and endpoints in the environment, the SDK's own IMDS lookups off.
// The SDK keeps its own buildable HTTP client: AWS_CA_BUNDLE is set on these machines, and a
// plain *http.Client would make LoadDefaultConfig fail.
func start(t *testing.T, cfg Config) (*Server, clients) {
	t.Helper()
	s := StartForTest(t, cfg)
	return s, newClients(t)
}

// newClients builds the clients from the environment, with the standard retryer's backoff cut
// short so that retried throttling does not slow the tests.
func newClients(t *testing.T) clients {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(t.Context(), config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 20 * time.Millisecond })
	}))
	if err != nil {
		t.Fatal(err)
	}
	return clients{
		ec2:     ec2.NewFromConfig(cfg),
		pricing: pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = "us-east-1" }),
		quotas:  servicequotas.NewFromConfig(cfg),
	}
}

// apiCode is the error code of an SDK error, "" when it is not an API error.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// helperScript is user-data that runs this test binary as a helper process (TestHelperProcess)
// in mode. GORACE keeps a -race binary from sleeping a second before it exits.
func helperScript(t *testing.T, mode string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("#!/bin/sh\nGORACE=atexit_sleep_ms=0 EC2SIM_HELPER=%s exec '%s' -test.run='^TestHelperProcess$'\n", mode, exe)
}

func b64(s string) *string { return aws.String(encode(s)) }

// runInput is a one-instance RunInstances request.
func runInput(userData string) *ec2.RunInstancesInput {
	in := &ec2.RunInstancesInput{
		ImageId: aws.String(testAMI), InstanceType: types.InstanceTypeP32xlarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId:                          aws.String("subnet-0a0000000000000a1"),
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
	}
	if userData != "" {
		in.UserData = b64(userData)
	}
	return in
}

// waitFile waits for a file a helper writes (atomically, by rename) and returns its content.
func waitFile(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", path, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitState(t *testing.T, s *Server, id, state string) Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	in, err := s.WaitState(ctx, id, state)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestHelperProcess is the program some instances' user-data runs: it is this test binary,
// started with EC2SIM_HELPER set to what it should do. It finds out who it is through its IMDS,
// with the real SDK's IMDS client configured from its environment alone, and leaves what it saw
// in files in its working directory.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("EC2SIM_HELPER")
	if mode == "" {
		return
	}
	if err := helper(mode); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helper(mode string) error {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	md := imds.NewFromConfig(cfg)
	id, err := metadata(ctx, md, "instance-id")
	if err != nil {
		return err
	}
	if err := writeFile("instance-id", id); err != nil {
		return err
	}
	switch mode {
	case "exit":
		return nil
	case "wait":
		select {}
	case "creds":
		c, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return err
		}
		if err := writeFile("creds", c.AccessKeyID+" "+c.Source); err != nil {
			return err
		}
		select {}
	case "spot":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		for {
			action, err := metadata(ctx, md, "spot/instance-action")
			if err == nil {
				rebalance, _ := metadata(ctx, md, "events/recommendations/rebalance")
				if err := writeFile("rebalance", rebalance); err != nil {
					return err
				}
				if err := writeFile("notice", action); err != nil {
					return err
				}
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		<-term // the trainer's checkpoint would happen here
		return writeFile("sigterm", "checkpointed")
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func metadata(ctx context.Context, md *imds.Client, path string) (string, error) {
	out, err := md.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	return strings.TrimSpace(string(b)), err
}

func writeFile(name, content string) error {
	if err := os.WriteFile(name+".tmp", []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(name+".tmp", name)
}
