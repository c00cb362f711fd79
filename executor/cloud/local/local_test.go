package local

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

var offer = cloud.Offer{InstanceType: "p3.8xlarge", Market: cloud.OnDemand, PricePerHour: 12.24}

// config is a provider whose nodes take 0.2 s to scale and 0.1 s to initialise.
func config(t *testing.T) Config {
	return Config{StateFile: filepath.Join(t.TempDir(), "nodes.json"), GPUsPerNode: 4, Scale: sim.Constant(20), Init: sim.Constant(10),
		TimeScale: 0.01, Rand: spec.NewRand(1, 1), Offer: offer}
}

// The Provider contract, reopened from the state file.
func TestContract(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			cfg := config(t)
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return p, func(t *testing.T) cloud.Provider {
				q, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				return q
			}
		},
		GPUsPerNode: 4,
		Offer:       offer,
		CancelAfter: 100 * time.Millisecond, // within the scale latency
	})
}

// Nodes come up after the (scaled) scale and init latencies, and are billed from the end of the
// scale latency.
func TestEmulatedLatencies(t *testing.T) {
	p, err := New(config(t))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nodes, err := p.Create(context.Background(), cloud.Request{Count: 3})
	if err != nil || len(nodes) != 3 {
		t.Fatal(nodes, err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("create took %v, want at least the 0.3 s of scaled latency", el)
	}
	if run := nodes[0].RunningAt.Sub(start); run < 200*time.Millisecond || run > 280*time.Millisecond {
		t.Fatalf("billing starts %v after the request, want the 0.2 s scale latency", run)
	}
}

// Emulated spot interruptions: a spot node lives what the spot model draws from the seed (the
// same for the same seed and node), then its notice is told, and the node is gone a notice
// later; a node released before its interruption is never told of one; on-demand nodes are
// never interrupted.
func TestEmulatedSpotInterruptions(t *testing.T) {
	type notice struct {
		node string
		at   time.Time
	}
	run := func(market cloud.Market, seed uint64, wait time.Duration) ([]notice, []cloud.Node, *Provider) {
		cfg := config(t)
		cfg.Offer.Market = market
		got := make(chan notice, 10)
		// 60 s on average (0.6 s at this time scale), a notice of 20 s (0.2 s).
		cfg.Spot = &SpotEmulation{Model: &sim.Spot{Rate: 1.0 / 60}, Notice: 20 * time.Second, Seed: seed,
			Notify: func(node, _ string) { got <- notice{node, time.Now()} }}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		nodes, err := p.Create(t.Context(), cloud.Request{Count: 3})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Delete(t.Context(), []string{nodes[2].ID}); err != nil { // released: never interrupted
			t.Fatal(err)
		}
		var notices []notice
		for deadline := time.After(wait); len(notices) < 2; {
			select {
			case n := <-got:
				notices = append(notices, n)
			case <-deadline:
				return notices, nodes, p
			}
		}
		time.Sleep(300 * time.Millisecond) // past the last notice
		return notices, nodes, p
	}
	notices, nodes, p := run(cloud.Spot, 7, 8*time.Second)
	if len(notices) != 2 {
		t.Fatalf("%d notices in 8 s, want one for each of the 2 spot nodes held (mean life 0.6 s)", len(notices))
	}
	for _, n := range notices {
		if n.node == nodes[2].ID {
			t.Fatalf("a released node was interrupted")
		}
	}
	if held, _ := p.List(t.Context()); len(held) != 0 {
		t.Fatalf("nodes %v still held a notice after their interruption", held)
	}
	// The same seed draws the same lives: the nodes are interrupted in the same order.
	again, _, _ := run(cloud.Spot, 7, 8*time.Second)
	if len(again) != 2 || again[0].node != notices[0].node || again[1].node != notices[1].node {
		t.Fatalf("the same seed interrupted %v, then %v", notices, again)
	}
	if od, _, _ := run(cloud.OnDemand, 7, 2*time.Second); len(od) != 0 {
		t.Fatalf("on-demand nodes were interrupted: %v", od)
	}
}
