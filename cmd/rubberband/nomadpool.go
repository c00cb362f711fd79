package main

import (
	"context"
	"fmt"
	"os"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadpool"
	"github.com/rubberband-hpo/rubberband/spec"
)

// nomadPoolProvider claims the clients of the team's cluster that cluster.nomad selects. The
// cluster is NOMAD_ADDR's (with NOMAD_TOKEN, NOMAD_REGION, NOMAD_NAMESPACE), never one of our
// own: a server started here would have none of the team's clients. Nothing is started, so the
// stop function stops nothing: the team's agents outlive the run, and releasing the claims is
// the executor's (Delete).
func nomadPoolProvider(ctx context.Context, exp *spec.Experiment, _, runID string, offer cloud.Offer) (cloud.Provider, *nomadapi.Client, func(), error) {
	if err := checkNomadPool(exp); err != nil {
		return nil, nil, nil, err
	}
	client, err := nomadapi.NewClient(nomadapi.DefaultConfig())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nomad: %w", err)
	}
	provider, err := nomadpool.New(ctx, nomadpool.Config{Client: client, RunID: runID, Experiment: exp.Name, Pool: *exp.Cluster.Nomad,
		GPUsPerNode: exp.Cluster.GPUsPerNode, InstanceType: exp.Cluster.InstanceType, PricePerHour: offer.PricePerHour})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (NOMAD_ADDR=%s)", err, os.Getenv("NOMAD_ADDR"))
	}
	return provider, client, func() {}, nil
}

// checkNomadPool says what a nomad run with cluster.nomad lacks, before its state directory is
// made a run: the cluster's address, and a market the team's clients are in.
func checkNomadPool(exp *spec.Experiment) error {
	if exp.Cluster.Nomad == nil {
		return nil
	}
	if os.Getenv("NOMAD_ADDR") == "" {
		return usageErr("cluster.nomad selects clients of an existing Nomad cluster: set NOMAD_ADDR to its address " +
			"(and NOMAD_TOKEN, NOMAD_NAMESPACE as for the nomad CLI), or drop cluster.nomad to run client agents on this machine")
	}
	if exp.Cluster.Market == spec.MarketSpot {
		return usageErr("cluster.nomad: a team's Nomad clients are not spot instances: drop cluster.market: spot")
	}
	return nil
}
