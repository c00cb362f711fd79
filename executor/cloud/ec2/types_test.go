package ec2_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// g3 is a second instance type: 2 GPUs a node, its own prices.
var g3 = rbec2.Kind{InstanceType: "g3.8xlarge", GPUsPerNode: 2, OnDemandPrice: 2.28, SpotPrice: 0.69}

// gpuScript is user-data that says the GPUs its kind was rendered with, as the node agent's
// script passes them to the agent.
func gpuScript(node string, k rbec2.Kind) (string, error) {
	return fmt.Sprintf("#!/bin/sh\necho node %s gpus %d\nexec sleep 300\n", node, k.GPUsPerNode), nil
}

// One provider rents both of the spec's types, on both markets, in one run: each node is an
// instance of the type asked for, on the market asked for (or the one it fell back to, per
// type), stamped with that type's GPUs and that market's price, and booted with user-data
// rendered for its type's GPUs. A type the spec does not offer is a CapacityError naming it,
// with nothing rented. A provider reopened on the run lists every node as it was stamped, and
// one whose spec no longer offers g3 still reports its nodes' GPUs and price from their tags.
func TestRentsEveryType(t *testing.T) {
	s := startSim(t, ec2sim.Config{})
	cfg := config()
	cfg.More, cfg.UserData = []rbec2.Kind{g3}, gpuScript
	p := open(t, cfg)
	type want struct {
		typ    string
		market cloud.Market
		gpus   int
		price  float64
	}
	wants := map[string]want{}
	rent := func(req cloud.Request, w want) {
		t.Helper()
		nodes, err := p.Create(t.Context(), req)
		if err != nil || len(nodes) != req.Count {
			t.Fatalf("create %+v: %v, %v", req, nodes, err)
		}
		for _, n := range nodes {
			in := instance(t, s, n.ID)
			if n.InstanceType != w.typ || n.Market != w.market || n.GPUs != w.gpus || n.PricePerHour != w.price {
				t.Errorf("create %+v: node %+v, want %+v", req, n, w)
			}
			if in.Type != w.typ || in.Market != string(w.market) {
				t.Errorf("create %+v: instance %s is a %s %s", req, in.ID, in.Market, in.Type)
			}
			if ud := string(in.UserData); !strings.Contains(ud, fmt.Sprintf("gpus %d\n", w.gpus)) {
				t.Errorf("create %+v: instance %s booted with user-data for another GPU count:\n%s", req, in.ID, ud)
			}
			wants[n.ID] = w
		}
	}
	rent(cloud.Request{Count: 1}, want{testType, cloud.OnDemand, 1, onDemandPrice}) // the default type and market
	rent(cloud.Request{Count: 2, InstanceType: g3.InstanceType, Market: cloud.Spot}, want{g3.InstanceType, cloud.Spot, 2, g3.SpotPrice})
	rent(cloud.Request{Count: 1, InstanceType: g3.InstanceType, Market: cloud.OnDemand}, want{g3.InstanceType, cloud.OnDemand, 2, g3.OnDemandPrice})
	rent(cloud.Request{Count: 1, InstanceType: testType, Market: cloud.Spot}, want{testType, cloud.Spot, 1, spotPrice})
	// No g3 spot left in either subnet: that type falls back to its own on-demand price.
	s.FailCapacity("", "MaxSpotInstanceCountExceeded", 2)
	rent(cloud.Request{Count: 1, InstanceType: g3.InstanceType, Market: cloud.Spot}, want{g3.InstanceType, cloud.OnDemand, 2, g3.OnDemandPrice})

	calls := len(runCalls(s))
	nodes, err := p.Create(t.Context(), cloud.Request{Count: 1, InstanceType: "p3.8xlarge", Market: cloud.Spot})
	var capacity *cloud.CapacityError
	if !errors.As(err, &capacity) || capacity.InstanceType != "p3.8xlarge" || len(nodes) != 0 {
		t.Fatalf("a type the spec does not offer: %v, %v; want a CapacityError naming it and no node", nodes, err)
	}
	mustContain(t, err, "p3.8xlarge", testType, g3.InstanceType)
	if len(runCalls(s)) != calls {
		t.Fatalf("a refused type cost %d RunInstances", len(runCalls(s))-calls)
	}

	list := func(p *rbec2.Provider, what string) {
		t.Helper()
		held, err := p.List(t.Context())
		if err != nil || len(held) != len(wants) {
			t.Fatalf("%s: list %v, %v; want %d nodes", what, held, err, len(wants))
		}
		for _, n := range held {
			if w, ok := wants[n.ID]; !ok || n.InstanceType != w.typ || n.Market != w.market || n.GPUs != w.gpus || n.PricePerHour != w.price {
				t.Errorf("%s: listed %+v, rented as %+v", what, n, w)
			}
		}
	}
	list(open(t, cfg), "reopened")
	own := cfg
	own.More = nil
	list(open(t, own), "reopened without g3 in the spec")
}

// A spot request of a type without a spot price is refused: the meter would bill it nothing.
// Two kinds of one type are a configuration error.
func TestKindsChecked(t *testing.T) {
	startSim(t, ec2sim.Config{})
	cfg := config()
	cfg.More = []rbec2.Kind{{InstanceType: g3.InstanceType, GPUsPerNode: 2, OnDemandPrice: g3.OnDemandPrice}}
	_, err := open(t, cfg).Create(t.Context(), cloud.Request{Count: 1, InstanceType: g3.InstanceType, Market: cloud.Spot})
	var capacity *cloud.CapacityError
	if !errors.As(err, &capacity) || capacity.InstanceType != g3.InstanceType || capacity.Market != cloud.Spot {
		t.Fatalf("spot without a spot price: %v", err)
	}
	cfg.More = []rbec2.Kind{g3, {InstanceType: testType, GPUsPerNode: 8}}
	_, err = rbec2.New(t.Context(), cfg)
	mustContain(t, err, testType, "twice")
}
