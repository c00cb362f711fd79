package ec2sim

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func encode(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestOnDemandInstanceBootsRunsUserDataAndTerminates(t *testing.T) {
	s, c := start(t, Config{BootDelay: 300 * time.Millisecond})
	in := runInput(helperScript(t, "wait"))
	in.SecurityGroupIds = []string{"sg-0123456789abcdef0"}
	in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String("rubberband-node")}
	in.KeyName = aws.String("ops")
	in.TagSpecifications = []types.TagSpecification{
		{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("rubberband:run"), Value: aws.String("r1")}}},
		{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("rubberband:run"), Value: aws.String("r1")}}},
	}
	out, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 {
		t.Fatalf("%d instances, want 1", len(out.Instances))
	}
	got := out.Instances[0]
	id := aws.ToString(got.InstanceId)
	if got.State.Name != types.InstanceStateNamePending || aws.ToInt32(got.State.Code) != 0 {
		t.Errorf("state %v/%d after RunInstances, want pending/0", got.State.Name, aws.ToInt32(got.State.Code))
	}
	if aws.ToString(got.Placement.AvailabilityZone) != "us-east-1a" || aws.ToString(got.SubnetId) != "subnet-0a0000000000000a1" {
		t.Errorf("placed in %s/%s", aws.ToString(got.Placement.AvailabilityZone), aws.ToString(got.SubnetId))
	}
	if got.InstanceLifecycle != "" || got.InstanceType != types.InstanceTypeP32xlarge || aws.ToString(got.ImageId) != testAMI {
		t.Errorf("instance %+v", got)
	}
	if len(got.Tags) != 1 || aws.ToString(got.Tags[0].Key) != "rubberband:run" {
		t.Errorf("tags %+v", got.Tags)
	}
	if len(got.SecurityGroups) != 1 || aws.ToString(got.IamInstanceProfile.Arn) != "arn:aws:iam::123456789012:instance-profile/rubberband-node" {
		t.Errorf("groups %+v, profile %+v", got.SecurityGroups, got.IamInstanceProfile)
	}

	// The SDK's own waiter reads the state from DescribeInstances.
	w := ec2.NewInstanceRunningWaiter(c.ec2, func(o *ec2.InstanceRunningWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 100*time.Millisecond
	})
	desc, err := w.WaitForOutput(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	run := desc.Reservations[0].Instances[0]
	if aws.ToString(run.PrivateIpAddress) != "127.0.0.1" || run.LaunchTime == nil || time.Since(*run.LaunchTime) > time.Minute {
		t.Errorf("running instance %+v", run)
	}
	snap := s.Instances()[0]
	if snap.VolumeTags["rubberband:run"] != "r1" || snap.RunningTime.Sub(snap.LaunchTime) < 300*time.Millisecond {
		t.Errorf("snapshot %+v", snap)
	}

	// The user-data ran and found its own instance id through its own IMDS.
	if seen := waitFile(t, filepath.Join(snap.Dir, "root", "instance-id"), 10*time.Second); seen != id {
		t.Errorf("the user-data saw instance id %q, want %q", seen, id)
	}
	log, _ := os.ReadFile(filepath.Join(snap.Dir, "console.log"))
	if !strings.Contains(string(log), "runs user-data as process") {
		t.Errorf("console.log:\n%s", log)
	}

	term, err := c.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	ch := term.TerminatingInstances[0]
	if ch.PreviousState.Name != types.InstanceStateNameRunning || ch.CurrentState.Name != types.InstanceStateNameShuttingDown {
		t.Errorf("terminate: %v -> %v", ch.PreviousState.Name, ch.CurrentState.Name)
	}
	tw := ec2.NewInstanceTerminatedWaiter(c.ec2, func(o *ec2.InstanceTerminatedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 100*time.Millisecond
	})
	desc, err = tw.WaitForOutput(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := desc.Reservations[0].Instances[0]
	if aws.ToString(done.StateReason.Code) != ReasonUserInitiated || !strings.HasPrefix(aws.ToString(done.StateTransitionReason), "User initiated (") {
		t.Errorf("terminated with %+v, %q", done.StateReason, aws.ToString(done.StateTransitionReason))
	}
	if alive(snap.PID) {
		t.Errorf("user-data process %d survived termination", snap.PID)
	}
}

func TestUserDataExitShutsTheInstanceDown(t *testing.T) {
	s, c := start(t, Config{})
	out, err := c.ec2.RunInstances(t.Context(), runInput(helperScript(t, "exit")))
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	snap := waitState(t, s, id, StateTerminated)
	if snap.StateReason != ReasonInstanceInitiated {
		t.Errorf("reason %q, want %s", snap.StateReason, ReasonInstanceInitiated)
	}
	if seen, _ := os.ReadFile(filepath.Join(snap.Dir, "root", "instance-id")); string(seen) != id {
		t.Errorf("the user-data saw %q", seen)
	}
	desc, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if r := desc.Reservations[0].Instances[0].StateReason; aws.ToString(r.Code) != ReasonInstanceInitiated ||
		aws.ToString(r.Message) != "Client.InstanceInitiatedShutdown: Instance initiated shutdown" {
		t.Errorf("state reason %+v", r)
	}

	// Without a shutdown behaviour, EC2's default stops the instance; terminating it then is
	// immediate.
	in := runInput("#!/bin/sh\nexit 3\n")
	in.InstanceInitiatedShutdownBehavior = ""
	out, err = c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	id = aws.ToString(out.Instances[0].InstanceId)
	waitState(t, s, id, StateStopped)
	term, err := c.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if ch := term.TerminatingInstances[0]; ch.PreviousState.Name != types.InstanceStateNameStopped || ch.CurrentState.Name != types.InstanceStateNameTerminated {
		t.Errorf("terminate a stopped instance: %v -> %v", ch.PreviousState.Name, ch.CurrentState.Name)
	}
}

func TestClientTokenRentsOnce(t *testing.T) {
	s, c := start(t, Config{})
	in := runInput("")
	in.ClientToken = aws.String("rb-run1-node3-attempt1")
	first, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	// The driver died before it read the answer; on resume it sends the same request again.
	again, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := aws.ToString(first.Instances[0].InstanceId), aws.ToString(again.Instances[0].InstanceId); a != b || aws.ToString(first.ReservationId) != aws.ToString(again.ReservationId) {
		t.Errorf("the same token gave instances %s and %s", a, b)
	}
	if n := len(s.Instances()); n != 1 {
		t.Errorf("%d instances rented, want 1", n)
	}
	if got := aws.ToString(again.Instances[0].ClientToken); got != "rb-run1-node3-attempt1" {
		t.Errorf("clientToken %q", got)
	}
	in.InstanceType = types.InstanceTypeP38xlarge
	if _, err := c.ec2.RunInstances(t.Context(), in); apiCode(err) != "IdempotentParameterMismatch" {
		t.Errorf("the token with other parameters: %v", err)
	}
	desc, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("client-token"), Values: []string{"rb-run1-*"}}}})
	if err != nil || len(desc.Reservations) != 1 {
		t.Errorf("by client token: %v, %+v", err, desc)
	}
	var tokens int
	for _, call := range s.Calls() {
		if call.Action == "RunInstances" && call.Params["ClientToken"] == "rb-run1-node3-attempt1" {
			tokens++
		}
	}
	if tokens != 3 {
		t.Errorf("%d RunInstances calls with the token, want 3", tokens)
	}
	// Without a token the SDK makes one up (ClientToken is an idempotency token in its model)
	// and writes it into the input: its own retries are safe, and sending the same input struct
	// again replays the first call.
	fresh := runInput("")
	one, err := c.ec2.RunInstances(t.Context(), fresh)
	if err != nil {
		t.Fatal(err)
	}
	calls := s.Calls()
	if last := calls[len(calls)-1]; last.Params["ClientToken"] == "" || aws.ToString(fresh.ClientToken) != last.Params["ClientToken"] {
		t.Errorf("the SDK's own ClientToken: sent %q, left in the input %q", last.Params["ClientToken"], aws.ToString(fresh.ClientToken))
	}
	two, err := c.ec2.RunInstances(t.Context(), fresh)
	if err != nil || aws.ToString(two.Instances[0].InstanceId) != aws.ToString(one.Instances[0].InstanceId) {
		t.Errorf("a reused input rented again: %v", err)
	}
	if n := len(s.Instances()); n != 2 {
		t.Errorf("%d instances, want 2", n)
	}
}

func TestDryRun(t *testing.T) {
	s, c := start(t, Config{})
	in := runInput("")
	in.DryRun = aws.Bool(true)
	_, err := c.ec2.RunInstances(t.Context(), in)
	if apiCode(err) != "DryRunOperation" {
		t.Fatalf("dry run: %v, want DryRunOperation", err)
	}
	if !strings.Contains(err.Error(), "StatusCode: 412") {
		t.Errorf("dry run status: %v", err)
	}
	bad := runInput("")
	bad.DryRun, bad.ImageId = aws.Bool(true), aws.String("ami-nothex")
	if _, err := c.ec2.RunInstances(t.Context(), bad); apiCode(err) != "InvalidAMIID.Malformed" {
		t.Errorf("dry run of a bad AMI: %v", err)
	}
	s.Deny("RunInstances", true)
	if _, err := c.ec2.RunInstances(t.Context(), in); apiCode(err) != "UnauthorizedOperation" {
		t.Errorf("denied dry run: %v", err)
	}
	s.Deny("RunInstances", false)
	if n := len(s.Instances()); n != 0 {
		t.Errorf("dry runs rented %d instances", n)
	}
	if _, err := c.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}, DryRun: aws.Bool(true)}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("dry-run terminate of an unknown instance: %v", err)
	}
}

func TestRunValidation(t *testing.T) {
	_, c := start(t, Config{Images: []string{testAMI}})
	cases := map[string]struct {
		edit func(*ec2.RunInstancesInput)
		code string
	}{
		"unknown AMI":     {func(in *ec2.RunInstancesInput) { in.ImageId = aws.String("ami-0000000000000000f") }, "InvalidAMIID.NotFound"},
		"unknown type":    {func(in *ec2.RunInstancesInput) { in.InstanceType = "x9.huge" }, "InvalidParameterValue"},
		"unknown subnet":  {func(in *ec2.RunInstancesInput) { in.SubnetId = aws.String("subnet-0fffffffffffffff0") }, "InvalidSubnetID.NotFound"},
		"bad group":       {func(in *ec2.RunInstancesInput) { in.SecurityGroupIds = []string{"default"} }, "InvalidGroupId.Malformed"},
		"min above max":   {func(in *ec2.RunInstancesInput) { in.MinCount = aws.Int32(2) }, "InvalidParameterValue"},
		"not base64":      {func(in *ec2.RunInstancesInput) { in.UserData = aws.String("#!/bin/sh") }, "InvalidParameterValue"},
		"user-data limit": {func(in *ec2.RunInstancesInput) { in.UserData = b64(strings.Repeat("x", 16<<10+1)) }, "InvalidParameterValue"},
		"reserved tag": {func(in *ec2.RunInstancesInput) {
			in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("aws:x"), Value: aws.String("1")}}}}
		}, "InvalidParameterValue"},
		"persistent spot": {func(in *ec2.RunInstancesInput) {
			in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
				SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypePersistent}}
		}, "InvalidParameterCombination"},
	}
	for name, tc := range cases {
		in := runInput("")
		tc.edit(in)
		if _, err := c.ec2.RunInstances(t.Context(), in); apiCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
}

func TestNeverBoot(t *testing.T) {
	s, c := start(t, Config{BootDelay: 50 * time.Millisecond})
	s.NeverBoot(1)
	in := runInput("")
	in.MinCount, in.MaxCount = aws.Int32(2), aws.Int32(2)
	out, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	stuck, fine := aws.ToString(out.Instances[0].InstanceId), aws.ToString(out.Instances[1].InstanceId)
	waitState(t, s, fine, StateRunning)
	time.Sleep(200 * time.Millisecond)
	desc, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{stuck}})
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.Reservations[0].Instances[0].State.Name; st != types.InstanceStateNamePending {
		t.Fatalf("a never-booting instance is %s", st)
	}
	if _, err := c.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{stuck}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, stuck, StateTerminated)
}

// alive says whether a process runs (a zombie does not).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, state, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}
