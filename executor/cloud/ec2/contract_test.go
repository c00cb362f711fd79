package ec2_test

import (
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/internal/testkit/ec2sim"
)

// The Provider contract on spot instances of the fake EC2, through the real SDK. Every New is
// a run of its own; reopening is a second Provider on the same run ID, that is on the same
// EC2 state, as a resumed driver opens one.
func TestContract(t *testing.T) {
	startSim(t, ec2sim.Config{BootDelay: 150 * time.Millisecond})
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			cfg := config()
			cfg.Market = cloud.Spot
			return open(t, cfg), func(t *testing.T) cloud.Provider { return open(t, cfg) }
		},
		GPUsPerNode: 1,
		Offer:       cloud.Offer{InstanceType: testType, Market: cloud.Spot, PricePerHour: spotPrice},
		CancelAfter: 75 * time.Millisecond, // rented, still pending
		Tokens:      true,
	})
}
