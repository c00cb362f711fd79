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
