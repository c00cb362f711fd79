package ec2_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// A pending instance of the run is listed (a resumed driver must find what a dead one rented),
// with RunningAt zero: it does not bill yet.
func TestListShowsPendingNodes(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	s.NeverBoot(1)
	cfg := config()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := open(t, cfg).Create(ctx, cloud.Request{Count: 1})
		done <- err
	}()
	waitFor(t, "an instance", func() bool { return len(s.Instances()) == 1 })
	held, err := open(t, cfg).List(t.Context())
	if err != nil || len(held) != 1 || held[0].ID != s.Instances()[0].ID || !held[0].RunningAt.IsZero() {
		t.Fatalf("list: %+v, %v; want the pending instance, not running", held, err)
	}
	if n := held[0]; n.Market != cloud.OnDemand || n.PricePerHour != onDemandPrice || n.InstanceType != testType {
		t.Fatalf("listed node %+v", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("create: %v", err)
	}
	if held, err := open(t, cfg).List(t.Context()); err != nil || len(held) != 0 {
		t.Fatalf("list after the cancelled create: %v, %v", held, err)
	}
}

// A running node is listed with its launch time (the earliest it can have billed from), its
// market and price; a spot instance that is interrupted stays listed through its notice, and
// is gone once terminated.
func TestInterruptedSpotLeavesList(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	cfg.Market = cloud.Spot
	p := open(t, cfg)
	nodes, err := p.Create(t.Context(), cloud.Request{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	held, err := p.List(t.Context())
	if err != nil || len(held) != 2 {
		t.Fatal(held, err)
	}
	for _, n := range held {
		in := instance(t, s, n.ID)
		if !n.RunningAt.Equal(in.LaunchTime.Truncate(time.Millisecond)) || n.Market != cloud.Spot || n.PricePerHour != spotPrice {
			t.Fatalf("listed %+v; instance launched %v", n, in.LaunchTime)
		}
	}
	gone := nodes[0].ID
	if err := s.Interrupt(gone, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if held, err := p.List(t.Context()); err != nil || len(held) != 2 {
		t.Fatalf("list during the notice: %v, %v", held, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.WaitState(ctx, gone, ec2sim.StateTerminated); err != nil {
		t.Fatal(err)
	}
	held, err = p.List(t.Context())
	if err != nil || len(held) != 1 || held[0].ID != nodes[1].ID {
		t.Fatalf("list after the interruption: %v, %v; want only %s", held, err, nodes[1].ID)
	}
}

// Delete terminates only the run's own instances: an ID of another run's instance is passed
// over like an unknown one.
func TestDeleteLeavesOtherRunsAlone(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	mine, theirs := open(t, config()), open(t, config())
	nodes, err := theirs.Create(t.Context(), cloud.Request{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := mine.Delete(t.Context(), []string{nodes[0].ID, "i-0123456789abcdef0"}); err != nil {
		t.Fatal(err)
	}
	if in := instance(t, s, nodes[0].ID); in.State != ec2sim.StateRunning {
		t.Fatalf("another run's Delete ended the instance: %s", in.State)
	}
}
