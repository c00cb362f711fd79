package ec2sim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
)

func spotInput(userData string) *ec2.RunInstancesInput {
	in := runInput(userData)
	in.InstanceType = types.InstanceTypeP38xlarge
	in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
		SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypeOneTime,
			InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate, MaxPrice: aws.String("12.24")}}
	return in
}

func TestSpotInterruption(t *testing.T) {
	s, c := start(t, Config{})
	out, err := c.ec2.RunInstances(t.Context(), spotInput(helperScript(t, "spot")))
	if err != nil {
		t.Fatal(err)
	}
	got := out.Instances[0]
	id := aws.ToString(got.InstanceId)
	if got.InstanceLifecycle != types.InstanceLifecycleTypeSpot || !strings.HasPrefix(aws.ToString(got.SpotInstanceRequestId), "sir-") {
		t.Errorf("spot instance: lifecycle %q, request %q", got.InstanceLifecycle, aws.ToString(got.SpotInstanceRequestId))
	}
	snap := waitState(t, s, id, StateRunning)
	root := filepath.Join(snap.Dir, "root")
	waitFile(t, filepath.Join(root, "instance-id"), 10*time.Second) // the helper polls IMDS now

	const notice = 700 * time.Millisecond
	at := time.Now()
	if err := s.Interrupt(id, notice); err != nil {
		t.Fatal(err)
	}
	var action struct{ Action, Time string }
	if err := json.Unmarshal([]byte(waitFile(t, filepath.Join(root, "notice"), 5*time.Second)), &action); err != nil {
		t.Fatal(err)
	}
	when, err := time.Parse(time.RFC3339, action.Time)
	if action.Action != "terminate" || err != nil || when.Before(at.Add(notice).Add(-time.Second)) {
		t.Errorf("instance-action %+v (%v)", action, err)
	}
	if rb := waitFile(t, filepath.Join(root, "rebalance"), time.Second); !strings.Contains(rb, `"noticeTime"`) {
		t.Errorf("rebalance recommendation %q", rb)
	}
	// Still running during the notice; terminated with the spot reason after it.
	if st := s.Instances()[0].State; st != StateRunning {
		t.Errorf("during the notice the instance is %s", st)
	}
	end := waitState(t, s, id, StateTerminated)
	if end.StateReason != ReasonSpotTermination || time.Since(at) < notice {
		t.Errorf("ended with %q after %v", end.StateReason, time.Since(at))
	}
	if got := waitFile(t, filepath.Join(root, "sigterm"), time.Second); got != "checkpointed" {
		t.Errorf("the trainer got no SIGTERM: %q", got)
	}
	desc, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	if r := desc.Reservations[0].Instances[0].StateReason; aws.ToString(r.Code) != ReasonSpotTermination {
		t.Errorf("state reason %+v", r)
	}
	if err := s.Interrupt(id, 0); err == nil {
		t.Error("interrupting a terminated instance worked")
	}
}

func TestCapacityFaultsPerZone(t *testing.T) {
	s, c := start(t, Config{})
	s.FailCapacity("us-east-1a", "InsufficientInstanceCapacity", 3)
	_, err := c.ec2.RunInstances(t.Context(), runInput(""))
	if apiCode(err) != "InsufficientInstanceCapacity" || !strings.Contains(err.Error(), "StatusCode: 500") {
		t.Fatalf("want InsufficientInstanceCapacity (500), got %v", err)
	}
	var attempts int
	for _, call := range s.Calls() {
		if call.Action == "RunInstances" && call.Error == "InsufficientInstanceCapacity" {
			attempts++
		}
	}
	if attempts != 3 {
		t.Errorf("the SDK made %d attempts, want its default 3 (a 500 is retried)", attempts)
	}
	// The next zone has capacity. Each call gets a fresh input: the SDK writes the ClientToken
	// it makes up into the input, so a reused input would replay the first call.
	inB := func() *ec2.RunInstancesInput {
		in := runInput("")
		in.SubnetId = aws.String("subnet-0b0000000000000b2")
		return in
	}
	out, err := c.ec2.RunInstances(t.Context(), inB())
	if err != nil {
		t.Fatal(err)
	}
	if az := aws.ToString(out.Instances[0].Placement.AvailabilityZone); az != "us-east-1b" {
		t.Errorf("zone %s", az)
	}

	// A 400 is not retried; a spot-only code leaves on-demand requests alone.
	s.FailCapacity("us-east-1b", "Unsupported", 1)
	if _, err := c.ec2.RunInstances(t.Context(), inB()); apiCode(err) != "Unsupported" {
		t.Errorf("want Unsupported, got %v", err)
	}
	s.FailCapacity("", "SpotMaxPriceTooLow", 1)
	if _, err := c.ec2.RunInstances(t.Context(), inB()); err != nil {
		t.Errorf("on-demand hit a spot fault: %v", err)
	}
	if _, err := c.ec2.RunInstances(t.Context(), spotInput("")); apiCode(err) != "SpotMaxPriceTooLow" {
		t.Errorf("want SpotMaxPriceTooLow, got %v", err)
	}

	// A real price rise does it too.
	if err := s.SetSpotPrice("p3.8xlarge", "us-east-1a", 13); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ec2.RunInstances(t.Context(), spotInput("")); apiCode(err) != "SpotMaxPriceTooLow" {
		t.Errorf("above MaxPrice: %v", err)
	}
}

func TestThrottlingIsRetried(t *testing.T) {
	s, c := start(t, Config{})
	s.Throttle(2)
	if _, err := c.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatalf("the standard retryer did not get through 2 throttles: %v", err)
	}
	var codes []string
	for _, call := range s.Calls() {
		codes = append(codes, call.Action+":"+call.Error)
	}
	want := "DescribeInstances:RequestLimitExceeded DescribeInstances:RequestLimitExceeded DescribeInstances:"
	if strings.Join(codes, " ") != want {
		t.Errorf("calls %v, want %s", codes, want)
	}
	s.Throttle(1)
	if _, err := c.quotas.GetServiceQuota(t.Context(), &servicequotas.GetServiceQuotaInput{
		ServiceCode: aws.String("ec2"), QuotaCode: aws.String(QuotaOnDemandP)}); err != nil {
		t.Errorf("a throttled GetServiceQuota was not retried: %v", err)
	}
}

func TestVCPUQuotas(t *testing.T) {
	s, c := start(t, Config{Quotas: map[string]float64{QuotaOnDemandP: 8}})
	if _, err := c.ec2.RunInstances(t.Context(), runInput("")); err != nil {
		t.Fatal(err)
	}
	_, err := c.ec2.RunInstances(t.Context(), runInput(""))
	if apiCode(err) != "VcpuLimitExceeded" {
		t.Fatalf("a second p3.2xlarge past 8 vCPUs: %v", err)
	}
	q, err := c.quotas.GetServiceQuota(t.Context(), &servicequotas.GetServiceQuotaInput{
		ServiceCode: aws.String("ec2"), QuotaCode: aws.String(QuotaOnDemandP)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToFloat64(q.Quota.Value) != 8 || aws.ToString(q.Quota.QuotaName) != "Running On-Demand P instances" {
		t.Errorf("quota %+v", q.Quota)
	}

	// MinCount..MaxCount: as many as fit.
	s.SetQuota(QuotaOnDemandP, 32)
	in := runInput("")
	in.MinCount, in.MaxCount = aws.Int32(1), aws.Int32(5)
	out, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil || len(out.Instances) != 3 {
		t.Fatalf("24 free vCPUs gave %v instances (%v), want 3", len(out.Instances), err)
	}

	s.SetQuota(QuotaSpotP, 16)
	if _, err := c.ec2.RunInstances(t.Context(), spotInput("")); apiCode(err) != "MaxSpotInstanceCountExceeded" {
		t.Errorf("a 32-vCPU spot instance under a 16-vCPU quota: %v", err)
	}
	// The g family has a quota of its own.
	g := runInput("")
	g.InstanceType = types.InstanceTypeG5Xlarge
	if _, err := c.ec2.RunInstances(t.Context(), g); err != nil {
		t.Errorf("g5.xlarge: %v", err)
	}
	if _, err := c.quotas.GetServiceQuota(t.Context(), &servicequotas.GetServiceQuotaInput{
		ServiceCode: aws.String("ec2"), QuotaCode: aws.String("L-00000000")}); apiCode(err) != "NoSuchResourceException" {
		t.Errorf("unknown quota: %v", err)
	}
}

func TestTerminateKillsTheProcessGroup(t *testing.T) {
	const grace = 400 * time.Millisecond
	s, c := start(t, Config{KillGrace: grace})
	// Both the shell and its child ignore SIGTERM: only SIGKILL, after the grace, ends them.
	script := "#!/bin/sh\ntrap '' TERM\necho $$ > pid\nsleep 300 &\necho $! > child.tmp && mv child.tmp child\nwait\n"
	id, root := runScript(t, s, c, script)
	child, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(root, "child"), 5*time.Second)))
	leader, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(root, "pid"), time.Second)))
	if !alive(child) || !alive(leader) {
		t.Fatalf("processes %d, %d are not running", leader, child)
	}
	at := time.Now()
	if _, err := c.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if st := s.Instances()[0].State; st != StateShuttingDown {
		t.Errorf("right after TerminateInstances: %s", st)
	}
	waitState(t, s, id, StateTerminated)
	if took := time.Since(at); took < grace {
		t.Errorf("terminated after %v, before the %v grace", took, grace)
	}
	if alive(leader) || alive(child) {
		t.Errorf("after termination: leader alive %v, child alive %v", alive(leader), alive(child))
	}
}

// A process that left the instance's process group (its own session, as a Nomad client's task
// executor starts) dies with the instance too, and so does its child, which works elsewhere.
func TestTerminateKillsProcessesThatLeftTheGroup(t *testing.T) {
	s, c := start(t, Config{KillGrace: 200 * time.Millisecond})
	elsewhere := t.TempDir()
	script := "#!/bin/sh\nsetsid sh -c 'echo $$ > escaped.tmp && mv escaped.tmp escaped; (cd " + elsewhere + " && exec sleep 300) & echo $! > grandchild.tmp && mv grandchild.tmp grandchild; wait' &\nwait\n"
	id, root := runScript(t, s, c, script)
	escaped, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(root, "escaped"), 5*time.Second)))
	grandchild, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(root, "grandchild"), 5*time.Second)))
	if !alive(escaped) || !alive(grandchild) {
		t.Fatalf("processes %d, %d are not running", escaped, grandchild)
	}
	if _, err := c.ec2.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, id, StateTerminated)
	for deadline := time.Now().Add(2 * time.Second); (alive(escaped) || alive(grandchild)) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(escaped) || alive(grandchild) {
		t.Fatalf("after termination: the process that left the group alive %v, its child alive %v", alive(escaped), alive(grandchild))
	}
}

// runScript rents an instance running script as its user-data and waits until it runs: its ID
// and root directory.
func runScript(t *testing.T, s *Server, c clients, script string) (id, root string) {
	t.Helper()
	out, err := c.ec2.RunInstances(t.Context(), runInput(script))
	if err != nil {
		t.Fatal(err)
	}
	id = aws.ToString(out.Instances[0].InstanceId)
	snap := waitState(t, s, id, StateRunning)
	return id, filepath.Join(snap.Dir, "root")
}

func TestCloseLeavesNoProcess(t *testing.T) {
	s, c := start(t, Config{})
	script := "#!/bin/sh\necho $$ > pid\nsleep 300 &\necho $! > child.tmp && mv child.tmp child\nwait\n"
	in := runInput(script)
	in.MinCount, in.MaxCount = aws.Int32(2), aws.Int32(2)
	out, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, i := range out.Instances {
		snap := waitState(t, s, aws.ToString(i.InstanceId), StateRunning)
		for _, f := range []string{"child", "pid"} {
			pid, _ := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(snap.Dir, "root", f), 5*time.Second)))
			pids = append(pids, pid)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d outlived Close", pid)
		}
	}
	for _, in := range s.Instances() {
		if in.State != StateTerminated {
			t.Errorf("after Close %s is %s", in.ID, in.State)
		}
	}
	if _, err := os.Stat(s.Dir()); err != nil {
		t.Errorf("Close removed a directory the test gave: %v", err)
	}
}

// A stalled RunInstances has rented before it answers: the instance is there while the caller
// still waits, and a replay of its client token afterwards gets that instance, not another.
func TestStallRunInstances(t *testing.T) {
	s, c := start(t, Config{})
	s.StallRunInstances(500 * time.Millisecond)
	in := runInput("")
	in.ClientToken = aws.String("stalled-token")
	type answer struct {
		out *ec2.RunInstancesOutput
		err error
	}
	done := make(chan answer, 1)
	began := time.Now()
	go func() {
		out, err := c.ec2.RunInstances(t.Context(), in)
		done <- answer{out, err}
	}()
	for len(s.Instances()) == 0 {
		if time.Since(began) > 5*time.Second {
			t.Fatal("nothing rented")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("answered before the stall ended")
	default:
	}
	a := <-done
	if a.err != nil || time.Since(began) < 500*time.Millisecond {
		t.Fatalf("answer %v after %s", a.err, time.Since(began))
	}
	again, err := c.ec2.RunInstances(t.Context(), in)
	if err != nil || len(s.Instances()) != 1 || aws.ToString(again.Instances[0].InstanceId) != aws.ToString(a.out.Instances[0].InstanceId) {
		t.Fatalf("replay: %v; %d instances", err, len(s.Instances()))
	}
}
