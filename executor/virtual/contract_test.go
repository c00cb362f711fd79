package virtual_test

import (
	"context"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/executor/gang/gangtest"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/spec"
)

// contractSpec is a job whose nodes take 20 s to start: long enough for a Create to be caught
// half way, in virtual time.
const contractSpec = `
name: contract
deadline: 1h
seed: 2
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 4, min_iters: 1, max_iters: 4, eta: 2}}
search_space: {x: {type: uniform, min: 0, max: 1}}
cluster:
  instance_type: p3.8xlarge
  market: spot
  spot: {interruptions_per_hour: 0.001, notice: 30s}
  scale_latency: {value: 15s}
  init_latency: {value: 5s}
  max_nodes: 8
profile:
  iter_latency: {1: {mean: 10, std: 1}, 2: {mean: 6, std: 1}, 4: {mean: 4, std: 0.5}}
  startup_latency: {value: 2s}
`

// newWorld is a fresh world of the contract's job on clock s.
func newWorld(t *testing.T, s *clock.Sim) *virtual.World {
	t.Helper()
	exp, err := spec.Parse("contract.yaml", []byte(contractSpec), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := virtual.NewWorld(s, exp, exp.Seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// within runs f as the main actor of s.
func within(s *clock.Sim) func(t *testing.T, f func(ctx context.Context)) {
	return func(t *testing.T, f func(ctx context.Context)) {
		t.Helper()
		if err := s.Run(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
}

// The virtual provider keeps the Provider contract, in virtual time: each driver's view of one
// world is a provider, and the next driver's view is the provider reopened. Every case has a
// world of its own, on one clock.
func TestProviderContract(t *testing.T) {
	s := clock.NewSim(virtual.Epoch)
	price := newWorld(t, s).Model().Offers[0].NodePricePerSecond * 3600
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			w := newWorld(t, s)
			p, _ := w.Driver(0)
			next := 0
			return p, func(t *testing.T) cloud.Provider {
				next++
				q, _ := w.Driver(next)
				return q
			}
		},
		GPUsPerNode: 4,
		Offer:       cloud.Offer{InstanceType: "p3.8xlarge", Market: cloud.Spot, PricePerHour: price},
		CancelAfter: 10 * time.Second,
		Tokens:      true,
		Clock:       s,
		Within:      within(s),
	})
}

// The virtual runtime keeps the Runtime contract's cases that need no shell, in virtual time:
// gangs train to their target, keep what they reached when stopped or interrupted, and are
// refused on a node the world does not hold.
func TestRuntimeContract(t *testing.T) {
	s := clock.NewSim(virtual.Epoch)
	gangtest.Run(t, func(t *testing.T) gangtest.Env {
		w := newWorld(t, s)
		p, r := w.Driver(0)
		var nodes []cloud.Node
		within(s)(t, func(ctx context.Context) {
			var err error
			if nodes, err = p.Create(ctx, cloud.Request{Count: 2}); err != nil {
				t.Fatal(err)
			}
		})
		return gangtest.Env{Runtime: r, Nodes: nodes, Unplaceable: "v9999", NoScripts: true, Interrupt: w.Interrupt,
			Clock: s, Within: func(t *testing.T, f func()) { within(s)(t, func(context.Context) { f() }) }}
	})
}
