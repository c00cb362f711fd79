package fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/gang/gangtest"
)

// The fake provider keeps the contract that the real ones keep, so that executor tests on it
// mean something; reopened, it is the same provider (an account outlives a driver).
func TestProviderContract(t *testing.T) {
	offer := cloud.Offer{InstanceType: "fake.large", Market: cloud.OnDemand, PricePerHour: 3.6}
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			p := &fake.Provider{GPUsPerNode: 2, Offer: offer}
			return p, func(*testing.T) cloud.Provider { return p }
		},
		GPUsPerNode: 2,
		Offer:       offer,
		Tokens:      true,
	})
}

// The fake runtime keeps the Runtime contract's cases that need no shell, in virtual time.
func TestRuntimeContract(t *testing.T) {
	s := clock.NewSim(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	gangtest.Run(t, func(t *testing.T) gangtest.Env {
		r := &fake.Runtime{Clock: s, Behave: func(gang.Gang, int) fake.Behavior {
			return fake.Behavior{Count: true, Duration: time.Second, Every: time.Second}
		}}
		return gangtest.Env{Runtime: r, Nodes: []cloud.Node{{ID: "n001", GPUs: 2}, {ID: "n002", GPUs: 2}}, NoScripts: true,
			Interrupt: r.InterruptNode, Clock: s, Within: func(t *testing.T, f func()) {
				if err := s.Run(context.Background(), func(context.Context) { f() }); err != nil {
					t.Fatal(err)
				}
			}}
	})
}
