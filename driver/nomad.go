package driver

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/checkpoint/open"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadpool"
	"github.com/rubberband-hpo/rubberband/executor/nomad"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// checkNomad says what a nomad run lacks: its providers rent one kind of node (a plan or a
// re-plan onto another would fail at that stage's start, after the money for the stages before
// it was spent), and a team's cluster needs its address and has no spot clients.
func checkNomad(exp *spec.Experiment) error {
	if offers := exp.Offers(); len(offers) > 1 {
		return inputErr("--backend nomad rents one kind of node, the cluster's own (%s %s), and the spec offers %d (cluster.instance_types, cluster.markets): "+
			"run it on --backend local or ec2, or list one type and one market", offers[0].Type.InstanceType, offers[0].Market, len(offers))
	}
	return checkNomadPool(exp)
}

// checkNomadPool says what a nomad run with cluster.nomad lacks: the cluster's address, and a
// market the team's clients are in.
func checkNomadPool(exp *spec.Experiment) error {
	if exp.Cluster.Nomad == nil {
		return nil
	}
	if os.Getenv("NOMAD_ADDR") == "" {
		return inputErr("cluster.nomad selects clients of an existing Nomad cluster: set NOMAD_ADDR to its address " +
			"(and NOMAD_TOKEN, NOMAD_NAMESPACE as for the nomad CLI), or drop cluster.nomad to run client agents on this machine")
	}
	if exp.Cluster.Market == spec.MarketSpot {
		return inputErr("cluster.nomad: a team's Nomad clients are not spot instances: drop cluster.market: spot")
	}
	return nil
}

// openNomad runs gangs as Nomad jobs on nodes of one of two kinds: with cluster.nomad, the
// existing clients of the team's cluster that NOMAD_ADDR names, claimed and released
// (nomadPoolProvider); without it, client agents the provider starts on this machine
// (nomadLocalProvider).
func openNomad(ctx context.Context, t target) (*Backend, error) {
	if err := checkNomadPool(t.exp); err != nil {
		return nil, err
	}
	m, err := sim.NewModel(t.exp)
	if err != nil {
		return nil, err
	}
	provide := nomadLocalProvider
	if t.exp.Cluster.Nomad != nil {
		provide = nomadPoolProvider
	}
	provider, client, stop, err := provide(ctx, t, offerOf(t.exp, m.Offer))
	if err != nil {
		return nil, err
	}
	rt, err := nomadRuntime(t, client, t.self)
	if err != nil {
		stop()
		return nil, err
	}
	// A team's clients carry no rb_node meta: they are pinned by their node ID.
	rt.PinNodeID = t.exp.Cluster.Nomad != nil
	if t.exp.Trainer.Image != "" { // containers inherit nothing: the store's credentials, as Nomad Variables
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"} {
			if v := os.Getenv(k); v != "" {
				rt.Secrets = append(rt.Secrets, k+"="+v)
			}
		}
	}
	return &Backend{Provider: provider, Runtime: rt, close: []func(){stop}}, nil
}

// nomadLocalProvider connects to the Nomad cluster NOMAD_ADDR names (with NOMAD_TOKEN,
// NOMAD_REGION, NOMAD_NAMESPACE, as the nomad CLI reads them), or starts a server of its own in
// the state directory when none is set, and starts client agents on this machine as nodes.
func nomadLocalProvider(ctx context.Context, t target, offer cloud.Offer) (cloud.Provider, *nomadapi.Client, func(), error) {
	client, bin, stop, err := nomadCluster(ctx, t.dir, t.log)
	if err != nil {
		return nil, nil, nil, err
	}
	provider, err := nomadlocal.New(ctx, nomadlocal.Config{NomadBin: bin, Dir: filepath.Join(t.dir, rundir.NomadDir), Client: client,
		GPUsPerNode: t.exp.Cluster.GPUsPerNode, FreePort: nomadlocal.FreePort, Offer: offer})
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	if os.Getenv("NOMAD_ADDR") == "" {
		// Our own server stops with us: so do the agents that joined it.
		stopServer := stop
		stop = func() { provider.Shutdown(); stopServer() }
	}
	return provider, client, stop, nil
}

// nomadPoolProvider claims the clients of the team's cluster that cluster.nomad selects. The
// cluster is NOMAD_ADDR's (with NOMAD_TOKEN, NOMAD_REGION, NOMAD_NAMESPACE), never one of our
// own: a server started here would have none of the team's clients. Nothing is started, so the
// stop function stops nothing: the team's agents outlive the run, and releasing the claims is
// the executor's (Delete).
func nomadPoolProvider(ctx context.Context, t target, offer cloud.Offer) (cloud.Provider, *nomadapi.Client, func(), error) {
	client, err := nomadapi.NewClient(nomadapi.DefaultConfig())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nomad: %w", err)
	}
	exp := t.exp
	provider, err := nomadpool.New(ctx, nomadpool.Config{Client: client, RunID: t.runID, Experiment: exp.Name, Pool: *exp.Cluster.Nomad,
		GPUsPerNode: exp.Cluster.GPUsPerNode, InstanceType: exp.Cluster.InstanceType, PricePerHour: offer.PricePerHour})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (NOMAD_ADDR=%s)", err, os.Getenv("NOMAD_ADDR"))
	}
	return provider, client, func() {}, nil
}

// nomadRuntime runs the run's gangs as Nomad jobs whose workers start self (the rubberband
// binary on the nodes), with the checkpoint store's settings and the run's time scale.
func nomadRuntime(t target, client *nomadapi.Client, self string) (*nomad.Runtime, error) {
	env, err := open.Env(t.exp.Checkpoints, filepath.Join(t.dir, rundir.CheckpointsDir))
	if err != nil {
		return nil, err
	}
	return &nomad.Runtime{Client: client, Experiment: t.exp.Name, RunID: t.runID, Self: self, StoreEnv: env,
		ExtraEnv: []string{fmt.Sprintf("RB_TIME_SCALE=%g", t.timeScale)}, LogDir: filepath.Join(t.dir, rundir.LogsDir), Log: t.log}, nil
}

// nomadCluster is a client of NOMAD_ADDR's cluster (with NOMAD_TOKEN, NOMAD_REGION,
// NOMAD_NAMESPACE), or of a one-server cluster started in dir when none is set, the nomad binary
// (nomadBinary) and what stops that server.
func nomadCluster(ctx context.Context, dir string, log io.Writer) (*nomadapi.Client, string, func(), error) {
	bin, err := nomadBinary()
	if err != nil {
		return nil, "", nil, err
	}
	stop := func() {}
	cfg := nomadapi.DefaultConfig()
	if os.Getenv("NOMAD_ADDR") == "" {
		server, err := nomadlocal.StartServer(ctx, bin, filepath.Join(dir, rundir.NomadDir, "server"), nomadlocal.FreePort)
		if err != nil {
			return nil, "", nil, err
		}
		cfg.Address, stop = server.Addr, server.Stop
		if server.Adopted {
			fmt.Fprintf(log, "resume: the Nomad server of the driver that died still runs (%s): this driver takes it over\n", server.Addr)
		}
	}
	client, err := nomadapi.NewClient(cfg)
	if err != nil {
		stop()
		return nil, "", nil, fmt.Errorf("nomad: %w", err)
	}
	return client, bin, stop, nil
}

// nomadBinary finds the nomad agent: RB_NOMAD_BIN, the one `make deps` built, or PATH.
func nomadBinary() (string, error) {
	if p := os.Getenv("RB_NOMAD_BIN"); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(filepath.Dir(self)), ".tools", "bin", "nomad")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("nomad"); err == nil {
		return p, nil
	}
	return "", inputErr("no nomad binary: run `make deps`, put nomad on PATH or set RB_NOMAD_BIN")
}
