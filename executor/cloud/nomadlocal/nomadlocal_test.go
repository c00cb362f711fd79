package nomadlocal_test

import (
	"context"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

var offer = cloud.Offer{InstanceType: "g4dn.2xlarge", Market: cloud.Spot, PricePerHour: 0.23}

// The Provider contract with real client agents joining one real Nomad server, reopened from the
// provider's state file.
func TestContract(t *testing.T) {
	n := servers.StartNomad(t)
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			cfg := nomadlocal.Config{NomadBin: n.Bin, Dir: t.TempDir(), Client: n.Client, GPUsPerNode: 2, FreePort: nomadlocal.FreePort, Offer: offer, Join: n.Fleet.Join()}
			open := func(t *testing.T) cloud.Provider {
				p, err := nomadlocal.New(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			return open(t), open
		},
		GPUsPerNode: 2,
		Offer:       offer,
		CancelAfter: 100 * time.Millisecond, // the agents have started, and are not ready yet
	})
}
