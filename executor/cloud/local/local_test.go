package local

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

var offer = cloud.Offer{InstanceType: "p3.8xlarge", Market: cloud.OnDemand, PricePerHour: 12.24}

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// config is a provider whose nodes take 0.2 s to scale and 0.1 s to initialise (20 s and 10 s at
// a time scale of 0.01), in virtual time on s.
func config(t *testing.T, s *clock.Sim) Config {
	c := Config{StateFile: filepath.Join(t.TempDir(), "nodes.json"), GPUsPerNode: 4, Scale: sim.Constant(20), Init: sim.Constant(10),
		TimeScale: 0.01, Rand: spec.NewRand(1, 1), Offer: offer}
	if s != nil {
		c.Clock = s
	}
	return c
}

// within runs f as s's main actor.
func within(t *testing.T, s *clock.Sim, f func(ctx context.Context)) {
	t.Helper()
	if err := s.Run(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

// The Provider contract, reopened from the state file.
func TestContract(t *testing.T) {
	s := clock.NewSim(epoch)
	providertest.Run(t, providertest.Harness{
		Clock:  s,
		Within: func(t *testing.T, f func(ctx context.Context)) { within(t, s, f) },
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			cfg := config(t, s)
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
	s := clock.NewSim(epoch)
	p, err := New(config(t, s))
	if err != nil {
		t.Fatal(err)
	}
	within(t, s, func(ctx context.Context) {
		start := s.Now()
		nodes, err := p.Create(ctx, cloud.Request{Count: 3})
		if err != nil || len(nodes) != 3 {
			t.Fatal(nodes, err)
		}
		if el := s.Now().Sub(start); el != 300*time.Millisecond {
			t.Fatalf("create took %v, want the 0.3 s of scaled latency", el)
		}
		if run := nodes[0].RunningAt.Sub(start); run != 200*time.Millisecond {
			t.Fatalf("billing starts %v after the request, want the 0.2 s scale latency", run)
		}
	})
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
	var stops, passed []notice // when the nodes' gangs were stopped; the notices NextNotice passed on
	run := func(market cloud.Market, seed uint64, wait time.Duration) (notices []notice, nodes []cloud.Node, p *Provider) {
		s := clock.NewSim(epoch)
		cfg := config(t, s)
		cfg.Offer.Market = market
		// 60 s on average (0.6 s at this time scale), a notice of 20 s (0.2 s).
		cfg.Spot = &SpotEmulation{Model: &sim.Spot{Rate: 1.0 / 60}, Notice: 20 * time.Second, Seed: seed,
			Notify: func(node, _ string) { notices = append(notices, notice{node, s.Now()}) },
			Stop:   func(node, _ string) { stops = append(stops, notice{node, s.Now()}) }}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		within(t, s, func(ctx context.Context) {
			listen, stop := context.WithCancel(ctx)
			defer stop()
			s.Go("notices", func() {
				for {
					n, err := p.NextNotice(listen)
					if err != nil {
						return
					}
					passed = append(passed, notice{n.Node, s.Now()})
				}
			})
			var err error
			if nodes, err = p.Create(ctx, cloud.Request{Count: 3}); err != nil {
				t.Fatal(err)
			}
			if err := p.Delete(ctx, []string{nodes[2].ID}); err != nil { // released: never interrupted
				t.Fatal(err)
			}
			s.Sleep(ctx, wait) // long enough for every interruption and notice to pass
		})
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
	// The driver hears of each notice as it is given (NextNotice), and the node's gangs are
	// stopped when it goes, a notice (0.2 s here) later: they train through it.
	for i, n := range notices {
		if i >= len(passed) || passed[i] != n || i >= len(stops) || stops[i].node != n.node || stops[i].at.Sub(n.at) != 200*time.Millisecond {
			t.Fatalf("notices %v, passed on %v, gangs stopped %v: want each passed on at once and its gangs stopped 0.2 s later", notices, passed, stops)
		}
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

// A provider of several kinds rents each request from the kind it names: that kind's GPUs,
// type, market and price; a kind it does not offer is a capacity error.
func TestKinds(t *testing.T) {
	cfg := config(t, nil)
	small := cloud.Offer{InstanceType: "p3.2xlarge", Market: cloud.Spot, PricePerHour: 0.92}
	cfg.More = []Kind{{Offer: small, GPUsPerNode: 1, Scale: sim.Constant(0), Init: sim.Constant(0)}}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := p.Create(context.Background(), cloud.Request{Count: 2, InstanceType: "p3.2xlarge", Market: cloud.Spot})
	if err != nil || len(nodes) != 2 || nodes[0].GPUs != 1 || nodes[0].InstanceType != "p3.2xlarge" || nodes[0].Market != cloud.Spot || nodes[0].PricePerHour != 0.92 {
		t.Fatalf("small nodes %+v, %v", nodes, err)
	}
	nodes, err = p.Create(context.Background(), cloud.Request{Count: 1, InstanceType: "p3.8xlarge"})
	if err != nil || nodes[0].GPUs != 4 || nodes[0].InstanceType != "p3.8xlarge" {
		t.Fatalf("default nodes %+v, %v", nodes, err)
	}
	var capacity *cloud.CapacityError
	if _, err := p.Create(context.Background(), cloud.Request{Count: 1, InstanceType: "p3.16xlarge"}); !errors.As(err, &capacity) {
		t.Fatalf("a kind it does not offer: %v", err)
	}
}

// Emulated stragglers: each node is slow with the share's probability, drawn from the seed by its
// place in the renting order (the same seed, the same slow nodes), slow by the factor; without a
// share none is.
func TestEmulatedSlowNodes(t *testing.T) {
	rent := func(slow *SlowEmulation) []float64 {
		cfg := config(t, nil)
		cfg.Scale, cfg.Init = sim.Constant(0), sim.Constant(0)
		cfg.Slow = slow
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := p.Create(t.Context(), cloud.Request{Count: 40})
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for _, n := range nodes {
			out = append(out, n.Slowdown)
		}
		return out
	}
	got := rent(&SlowEmulation{Share: 0.25, Factor: 3, Seed: 5})
	slow := 0
	for _, f := range got {
		switch f {
		case 3:
			slow++
		case 0:
		default:
			t.Fatalf("a node slowed by %v", f)
		}
	}
	if slow < 4 || slow > 18 { // Binomial(40, 0.25): 10 on average, outside 4..18 once in 10^3
		t.Fatalf("%d of 40 nodes slow at a share of 0.25", slow)
	}
	if again := rent(&SlowEmulation{Share: 0.25, Factor: 3, Seed: 5}); !slices.Equal(again, got) {
		t.Fatalf("the same seed slowed %v, then %v", got, again)
	}
	for _, f := range rent(nil) {
		if f != 0 {
			t.Fatal("a node slowed without stragglers")
		}
	}
}
