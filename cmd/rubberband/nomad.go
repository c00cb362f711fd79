package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/executor/nomad"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// nomadBackend runs gangs as Nomad jobs on nodes of one of two kinds: with cluster.nomad, the
// existing clients of the team's cluster that NOMAD_ADDR names, claimed and released
// (nomadPoolProvider); without it, client agents the provider starts on this machine
// (nomadLocalProvider). It returns the provider, the runtime and a function that stops what it
// started.
func nomadBackend(ctx context.Context, exp *spec.Experiment, dir string, timeScale float64, self, runID string) (cloud.Provider, executor.Runtime, func(), error) {
	m, err := sim.NewModel(exp)
	if err != nil {
		return nil, nil, nil, err
	}
	offer := offerOf(exp, m.Offer)
	open := nomadLocalProvider
	if exp.Cluster.Nomad != nil {
		open = nomadPoolProvider
	}
	provider, client, stop, err := open(ctx, exp, dir, runID, offer)
	if err != nil {
		return nil, nil, nil, err
	}
	rt, err := nomadRuntime(exp, dir, client, self, runID, timeScale)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	// A team's clients carry no rb_node meta: they are pinned by their node ID.
	rt.PinNodeID = exp.Cluster.Nomad != nil
	if exp.Trainer.Image != "" { // containers inherit nothing: the store's credentials, as Nomad Variables
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"} {
			if v := os.Getenv(k); v != "" {
				rt.Secrets = append(rt.Secrets, k+"="+v)
			}
		}
	}
	return provider, rt, stop, nil
}

// nomadLocalProvider connects to the Nomad cluster NOMAD_ADDR names (with NOMAD_TOKEN,
// NOMAD_REGION, NOMAD_NAMESPACE, as the nomad CLI reads them), or starts a server of its own in
// the state directory when none is set, and starts client agents on this machine as nodes.
func nomadLocalProvider(ctx context.Context, exp *spec.Experiment, dir, _ string, offer cloud.Offer) (cloud.Provider, *nomadapi.Client, func(), error) {
	client, bin, stop, err := nomadCluster(ctx, dir)
	if err != nil {
		return nil, nil, nil, err
	}
	provider, err := nomadlocal.New(ctx, nomadlocal.Config{NomadBin: bin, Dir: filepath.Join(dir, "nomad"), Client: client,
		GPUsPerNode: exp.Cluster.GPUsPerNode, FreePort: nomadlocal.FreePort, Offer: offer})
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

// nomadRuntime runs the run's gangs as Nomad jobs whose workers start self (the rubberband
// binary on the nodes), with the checkpoint store's settings and the run's time scale.
func nomadRuntime(exp *spec.Experiment, dir string, client *nomadapi.Client, self, runID string, timeScale float64) (*nomad.Runtime, error) {
	env, err := storeEnv(exp, dir)
	if err != nil {
		return nil, err
	}
	return &nomad.Runtime{Client: client, Experiment: exp.Name, RunID: runID, Self: self, StoreEnv: env,
		ExtraEnv: []string{fmt.Sprintf("RB_TIME_SCALE=%g", timeScale)}, LogDir: filepath.Join(dir, "logs"), Log: os.Stderr}, nil
}

// nomadCluster is a client of NOMAD_ADDR's cluster (with NOMAD_TOKEN, NOMAD_REGION,
// NOMAD_NAMESPACE), or of a one-server cluster started in dir when none is set, the nomad binary
// (nomadBinary) and what stops that server.
func nomadCluster(ctx context.Context, dir string) (*nomadapi.Client, string, func(), error) {
	bin, err := nomadBinary()
	if err != nil {
		return nil, "", nil, err
	}
	stop := func() {}
	cfg := nomadapi.DefaultConfig()
	if os.Getenv("NOMAD_ADDR") == "" {
		server, err := nomadlocal.StartServer(ctx, bin, filepath.Join(dir, "nomad", "server"), nomadlocal.FreePort)
		if err != nil {
			return nil, "", nil, err
		}
		cfg.Address, stop = server.Addr, server.Stop
		if server.Adopted {
			fmt.Fprintf(os.Stderr, "resume: the Nomad server of the driver that died still runs (%s): this driver takes it over\n", server.Addr)
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
	return "", usageErr("no nomad binary: run `make deps`, put nomad on PATH or set RB_NOMAD_BIN")
}
