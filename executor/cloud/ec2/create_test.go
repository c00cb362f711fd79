package ec2_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// An instance and its volume carry the experiment, the run, the node and the spec's own tags;
// the instance terminates on shutdown, sits in the spec's subnet and security groups, and its
// node is stamped with what it is and costs.
func TestTagsOnInstanceAndVolume(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	nodes, err := open(t, cfg).Create(t.Context(), cloud.Request{Count: 1})
	if err != nil || len(nodes) != 1 {
		t.Fatal(nodes, err)
	}
	in := instance(t, s, nodes[0].ID)
	node := in.Tags[rbec2.TagNode]
	if !strings.HasPrefix(node, cfg.RunID+"-n") {
		t.Errorf("node name %q: want the run ID and a suffix", node)
	}
	want := map[string]string{rbec2.TagExperiment: "unit", rbec2.TagRun: cfg.RunID, rbec2.TagNode: node, "Name": node, "team": "ml"}
	for what, got := range map[string]map[string]string{"instance": in.Tags, "volume": in.VolumeTags} {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s tag %s = %q, want %q", what, k, got[k], v)
			}
		}
	}
	if in.ShutdownBehavior != "terminate" || in.SubnetID != subnetA || !slices.Equal(in.SecurityGroups, cfg.EC2.SecurityGroups) ||
		in.Market != ec2sim.MarketOnDemand || in.ImageID != testAMI {
		t.Errorf("instance %+v", in)
	}
	n := nodes[0]
	if n.InstanceType != testType || n.Market != cloud.OnDemand || n.PricePerHour != onDemandPrice || n.Addr != "127.0.0.1" || n.GPUs != 1 {
		t.Errorf("node %+v", n)
	}
	if n.RunningAt.Before(in.RunningTime.Add(-time.Millisecond)) {
		t.Errorf("node running at %v, before the instance ran (%v)", n.RunningAt, in.RunningTime)
	}
}

// The user-data the renderer gives runs on the instance: its console shows the node's name.
// One too big for EC2 rents nothing.
func TestUserDataRuns(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	p := open(t, config())
	nodes, err := p.Create(t.Context(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := instance(t, s, nodes[0].ID)
	waitFor(t, "the user-data's echo", func() bool { return strings.Contains(consoleLog(in), "node "+in.Tags[rbec2.TagNode]+"\n") })

	cfg := config()
	cfg.UserData = func(string, rbec2.Kind) (string, error) { return "#!/bin/sh\n" + strings.Repeat("#", 16<<10), nil }
	calls := len(runCalls(s))
	nodes, err = open(t, cfg).Create(t.Context(), cloud.Request{Count: 1})
	mustContain(t, err, "user-data", "16384")
	if len(nodes) != 0 || len(runCalls(s)) != calls {
		t.Fatalf("user-data too big: %v, and %d RunInstances", nodes, len(runCalls(s))-calls)
	}
}

// A request repeated with the same Token (a driver that died before journaling what it rented,
// resumed) gets the instances the first one rented and rents nothing: whether the first one
// landed where the repeat asks first, or in the second subnet after a capacity error there.
func TestSameTokenRentsOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity bool
	}{{"same subnet", false}, {"after a capacity error", true}} {
		t.Run(c.name, func(t *testing.T) {
			s := startSim(t, ec2sim.Config{})
			if c.capacity {
				s.FailCapacity("us-east-1a", "InsufficientInstanceCapacity", 1)
			}
			cfg := config()
			req := cloud.Request{Count: 2, Token: "b0-s1-scale"}
			first, err := open(t, cfg).Create(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			rented := len(s.Instances())
			again, err := open(t, cfg).Create(t.Context(), req) // the resumed driver's provider
			if err != nil {
				t.Fatal(err)
			}
			ids := func(ns []cloud.Node) []string {
				var out []string
				for _, n := range ns {
					out = append(out, n.ID)
				}
				slices.Sort(out)
				return out
			}
			if !slices.Equal(ids(first), ids(again)) || len(s.Instances()) != rented || rented != 2 {
				t.Fatalf("first %v, repeated %v, %d instances rented then %d", ids(first), ids(again), rented, len(s.Instances()))
			}
			// The repeat did not see them start: they bill from their launch, no later than the
			// first request saw them run.
			for _, n := range again {
				in := instance(t, s, n.ID)
				if !n.RunningAt.Equal(in.LaunchTime.Truncate(time.Millisecond)) {
					t.Errorf("repeated node %s running at %v, launched %v", n.ID, n.RunningAt, in.LaunchTime)
				}
			}
			if c.capacity {
				var mismatch int
				for _, call := range runCalls(s) {
					if call.Error == "IdempotentParameterMismatch" {
						mismatch++
					}
				}
				if mismatch == 0 {
					t.Fatal("the repeat never met the first request's token in the other subnet")
				}
			}
		})
	}
}

// A capacity error in the first subnet moves the node to the next one, with the same token,
// without the SDK retrying the full zone.
func TestCapacityFallsOverToNextSubnet(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.FailCapacity("us-east-1a", "InsufficientInstanceCapacity", 100)
	nodes, err := open(t, config()).Create(t.Context(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if in := instance(t, s, nodes[0].ID); in.SubnetID != subnetB {
		t.Fatalf("instance in %s, want %s", in.SubnetID, subnetB)
	}
	calls := runCalls(s)
	if len(calls) != 2 || calls[0].Params["SubnetId"] != subnetA || calls[0].Error != "InsufficientInstanceCapacity" ||
		calls[1].Params["SubnetId"] != subnetB || calls[1].Error != "" || calls[0].Params["ClientToken"] != calls[1].Params["ClientToken"] {
		t.Fatalf("RunInstances calls %+v: want one in %s that failed, one in %s with the same token", calls, subnetA, subnetB)
	}
}

// Spot with no capacity in any subnet falls back to on-demand when the spec allows it (the node
// is stamped with the market it was rented on and that market's price), and is a
// *cloud.CapacityError naming type, market, subnets and AWS's code when it does not.
func TestSpotFallback(t *testing.T) {
	t.Run("on-demand", func(t *testing.T) {
		s := startSim(t, ec2sim.Config{})
		s.FailCapacity("", "SpotMaxPriceTooLow", 100)
		cfg := config()
		cfg.Market = cloud.Spot
		nodes, err := open(t, cfg).Create(t.Context(), cloud.Request{Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		if n := nodes[0]; n.Market != cloud.OnDemand || n.PricePerHour != onDemandPrice {
			t.Fatalf("node %+v: want on-demand at %v", n, onDemandPrice)
		}
		if in := instance(t, s, nodes[0].ID); in.Market != ec2sim.MarketOnDemand || in.SubnetID != subnetA {
			t.Fatalf("instance %+v: want on-demand in the first subnet", in)
		}
		var spot int
		for _, c := range runCalls(s) {
			if c.Params["InstanceMarketOptions.MarketType"] == "spot" {
				spot++
			}
		}
		if spot != 2 {
			t.Fatalf("%d spot requests before the fallback, want one per subnet", spot)
		}
	})
	t.Run("none", func(t *testing.T) {
		s := startSim(t, ec2sim.Config{})
		s.FailCapacity("", "SpotMaxPriceTooLow", 100)
		cfg := config()
		cfg.Market, cfg.Spot.Fallback = cloud.Spot, spec.FallbackNone
		nodes, err := open(t, cfg).Create(t.Context(), cloud.Request{Count: 2})
		var capacity *cloud.CapacityError
		if !errors.As(err, &capacity) || len(nodes) != 0 {
			t.Fatalf("create: %v, %v; want a *cloud.CapacityError and no node", nodes, err)
		}
		if capacity.Market != cloud.Spot || capacity.InstanceType != testType ||
			!strings.Contains(capacity.Zone, subnetA) || !strings.Contains(capacity.Zone, subnetB) ||
			!strings.Contains(capacity.Reason, "SpotMaxPriceTooLow") {
			t.Fatalf("capacity error %+v", capacity)
		}
		if len(s.Instances()) != 0 {
			t.Fatalf("rented %d instances", len(s.Instances()))
		}
	})
}

// Throttled requests are retried by the SDK's retryer, and the Create succeeds. (The adaptive
// retryer then sends at its lowest rate, one request every 2 s, and speeds up again: two
// throttles cost this test about 4 s.)
func TestThrottlingIsRetried(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.Throttle(2)
	nodes, err := open(t, config()).Create(t.Context(), cloud.Request{Count: 1})
	if err != nil || len(nodes) != 1 {
		t.Fatal(nodes, err)
	}
	var throttled int
	for _, c := range s.Calls() {
		if c.Error == "RequestLimitExceeded" {
			throttled++
		}
	}
	if throttled != 2 || len(s.Instances()) != 1 {
		t.Fatalf("%d throttled calls, %d instances", throttled, len(s.Instances()))
	}
}

// VcpuLimitExceeded stops the Create at once, with an error naming the quota that is not a
// CapacityError (no caller waits for a quota to grow); what came up is returned.
func TestQuotaStopsAtOnce(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.SetQuota(ec2sim.QuotaOnDemandP, 8) // one p3.2xlarge
	nodes, err := open(t, config()).Create(t.Context(), cloud.Request{Count: 3})
	mustContain(t, err, "L-417A185B", "VcpuLimitExceeded")
	var capacity *cloud.CapacityError
	if errors.As(err, &capacity) {
		t.Errorf("a quota error is a CapacityError: %v", err)
	}
	if len(nodes) != 1 || len(alive(s)) != 1 {
		t.Fatalf("%d nodes returned, %d instances alive; want the one the quota allows", len(nodes), len(alive(s)))
	}
	for _, c := range runCalls(s) {
		if c.Params["SubnetId"] != subnetA {
			t.Fatalf("a quota error moved on to %s", c.Params["SubnetId"])
		}
	}
}

// A Create cancelled while its nodes wait to be ready returns those that were, and terminates
// the others; one whose Ready fails is terminated too.
func TestCancelledCreateLeavesNothing(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var calls atomic.Int32
	cfg.Ready = func(ctx context.Context, id string) error {
		if calls.Add(1) == 1 {
			return nil
		}
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}
	nodes, err := open(t, cfg).Create(ctx, cloud.Request{Count: 3})
	if !errors.Is(err, context.Canceled) || len(nodes) != 1 {
		t.Fatalf("create: %v, %v; want one node and context.Canceled", nodes, err)
	}
	if a := alive(s); len(a) != 1 || a[0].ID != nodes[0].ID || len(s.Instances()) != 3 {
		t.Fatalf("alive %v of %d instances; want only %s", a, len(s.Instances()), nodes[0].ID)
	}

	cfg = config()
	cfg.Ready = func(ctx context.Context, id string) error { return errors.New("no Nomad client") }
	nodes, err = open(t, cfg).Create(t.Context(), cloud.Request{Count: 1})
	mustContain(t, err, "not ready", "no Nomad client")
	if len(nodes) != 0 || len(alive(s)) != 1 {
		t.Fatalf("a node that never got ready: %v returned, %d instances alive", nodes, len(alive(s)))
	}
}

// An instance that never boots holds the Create only as long as its context, or the boot
// timeout, and is terminated.
func TestNeverBootIsBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  time.Duration
		boot time.Duration
		want error
	}{{"context", 400 * time.Millisecond, 0, context.DeadlineExceeded}, {"boot timeout", 0, 400 * time.Millisecond, nil}} {
		t.Run(c.name, func(t *testing.T) {
			s := startSim(t, ec2sim.Config{})
			s.NeverBoot(1)
			cfg := config()
			cfg.BootTimeout = c.boot
			ctx := t.Context()
			if c.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.ctx)
				defer cancel()
			}
			start := time.Now()
			nodes, err := open(t, cfg).Create(ctx, cloud.Request{Count: 1})
			if err == nil || len(nodes) != 0 || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("create: %v, %v; want no node and an error (%v)", nodes, err, c.want)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("create took %v", el)
			}
			t.Log(err)
			if len(alive(s)) != 0 {
				t.Fatalf("the stuck instance was not terminated: %+v", alive(s))
			}
		})
	}
}

// A RunInstances whose answer is lost (EC2 rented; the connection dropped before the driver
// heard of it) rents once however often the SDK retries it (same token), and leaves no
// instance behind: the failed Create finds it by its token and terminates it.
func TestLostAnswerIsNotOrphaned(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	ac, err := awsconfig.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var lost atomic.Int32
	ac.APIOptions = append(ac.APIOptions, func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("loseAnswer",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleDeserialize(ctx, in)
				if err == nil && middleware.GetOperationName(ctx) == "RunInstances" {
					lost.Add(1)
					return middleware.DeserializeOutput{}, md, errors.New("read: connection reset by peer")
				}
				return out, md, err
			}), middleware.Before)
	})
	cfg := config()
	cfg.AWS = &ac
	nodes, err := open(t, cfg).Create(t.Context(), cloud.Request{Count: 1})
	mustContain(t, err, "connection reset")
	if len(nodes) != 0 || len(s.Instances()) != 1 || len(alive(s)) != 0 || lost.Load() < 2 {
		t.Fatalf("%v returned, %d instances rented, %d alive, %d answers lost: want the one rented, terminated, after retries",
			nodes, len(s.Instances()), len(alive(s)), lost.Load())
	}
}

// An instance whose user-data dies before its node is ready (a Nomad client that cannot start)
// fails its node at once rather than after Ready's own bound, and is not left running.
func TestReadyEndsWhenInstanceStops(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	// It dies half a second after it runs: the Create sees it running first.
	cfg.UserData = func(string, rbec2.Kind) (string, error) { return "#!/bin/sh\nsleep 0.5\nexit 1\n", nil }
	cfg.Ready = func(ctx context.Context, id string) error { <-ctx.Done(); return ctx.Err() }
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	nodes, err := open(t, cfg).Create(ctx, cloud.Request{Count: 1})
	mustContain(t, err, "not ready", "stopped running")
	if len(nodes) != 0 || len(alive(s)) != 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("after %v: %v returned, %d alive", time.Since(start), nodes, len(alive(s)))
	}
}

// Delete hands Drain the run's live instances among its IDs while they still run, then
// terminates them; a stray ID reaches neither.
func TestDeleteDrainsFirst(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	var drained []string
	cfg.Drain = func(ctx context.Context, ids []string) {
		for _, in := range s.Instances() {
			if slices.Contains(ids, in.ID) && in.State != ec2sim.StateRunning {
				t.Errorf("%s is %s when drained", in.ID, in.State)
			}
		}
		drained = append(drained, ids...)
	}
	p := open(t, cfg)
	nodes, err := p.Create(t.Context(), cloud.Request{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), []string{nodes[0].ID, nodes[1].ID, "i-00000000000000000"}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(drained)
	want := []string{nodes[0].ID, nodes[1].ID}
	slices.Sort(want)
	if !slices.Equal(drained, want) || len(alive(s)) != 0 {
		t.Fatalf("drained %v, want %v; %d alive", drained, want, len(alive(s)))
	}
}
