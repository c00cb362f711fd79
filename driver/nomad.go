package driver

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	nomadapi "github.com/hashicorp/nomad/api"

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
	rt.Secrets = storeSecrets(t.exp, t.served)
	return &Backend{Provider: provider, Runtime: rt, close: []func(){stop}}, nil
}

// nomadLocalProvider connects to the Nomad cluster NOMAD_ADDR names (teamNomadConfig), or
// starts a server of its own in the state directory when none is set, and starts client agents
// on this machine as nodes, with the one task driver the trainer needs.
func nomadLocalProvider(ctx context.Context, t target, offer cloud.Offer) (cloud.Provider, *nomadapi.Client, func(), error) {
	c, err := openNomadCluster(ctx, t.dir, t.log, "")
	if err != nil {
		return nil, nil, nil, err
	}
	provider, err := nomadlocal.New(ctx, nomadlocal.Config{NomadBin: c.bin, Dir: filepath.Join(t.dir, rundir.NomadDir), Client: c.client,
		GPUsPerNode: t.exp.Cluster.GPUsPerNode, FreePort: nomadlocal.FreePort, Offer: offer, Driver: taskDriver(t.exp), Join: c.join})
	if err != nil {
		c.stop()
		return nil, nil, nil, err
	}
	stop := c.stop
	if c.own {
		// Our own server stops with us: so do the agents that joined it.
		stop = func() { provider.Shutdown(); c.stop() }
	}
	return provider, c.client, stop, nil
}

// taskDriver is the one task driver the nodes of a run enable: docker for trainer.image, else
// raw_exec.
func taskDriver(exp *spec.Experiment) string {
	if exp.Trainer.Image != "" {
		return nomadlocal.DriverDocker
	}
	return nomadlocal.DriverRawExec
}

// nomadPoolProvider claims the clients of the team's cluster that cluster.nomad selects. The
// cluster is NOMAD_ADDR's (teamNomadConfig), never one of our own: a server started here would
// have none of the team's clients. Nothing is started, so the stop function stops nothing: the
// team's agents outlive the run, and releasing the claims is the executor's (Delete).
func nomadPoolProvider(ctx context.Context, t target, offer cloud.Offer) (cloud.Provider, *nomadapi.Client, func(), error) {
	cfg, _, err := teamNomadConfig(os.Getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	client, err := nomadapi.NewClient(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nomad: %w", err)
	}
	exp := t.exp
	provider, err := nomadpool.New(ctx, nomadpool.Config{Client: client, RunID: t.runID, Experiment: exp.Name, Pool: *exp.Cluster.Nomad,
		GPUsPerNode: exp.Cluster.GPUsPerNode, InstanceType: exp.Cluster.InstanceType, PricePerHour: offer.PricePerHour})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (NOMAD_ADDR=%s)", err, cfg.Address)
	}
	return provider, client, func() {}, nil
}

// nomadRuntime runs the run's gangs as Nomad jobs whose workers start self (the rubberband
// binary on the nodes), with the checkpoint store's settings and the run's time scale.
func nomadRuntime(t target, client *nomadapi.Client, self string) (*nomad.Runtime, error) {
	env, err := t.checkpoints().Env()
	if err != nil {
		return nil, err
	}
	return &nomad.Runtime{Client: client, Experiment: t.exp.Name, RunID: t.runID, Self: self, StoreEnv: env, Code: t.code,
		ExtraEnv: []string{fmt.Sprintf("RB_TIME_SCALE=%g", t.timeScale)}, LogDir: filepath.Join(t.dir, rundir.LogsDir), LogMax: t.logMax, Log: t.log}, nil
}

// nomadCluster is the Nomad cluster a run's gangs go to: an API client with its credentials,
// how client agents join it, and what stops it.
type nomadCluster struct {
	client *nomadapi.Client
	bin    string // the nomad binary, for the agents rubberband starts
	join   nomadlocal.Join
	stop   func()
	own    bool // a server of our own (stop stops it), not NOMAD_ADDR's
}

// openNomadCluster connects to NOMAD_ADDR's cluster (teamNomadConfig), or, when it is unset,
// starts a one-server cluster of our own in dir, locked down by a fleet kept beside it
// (nomadlocal.Fleet), bound and advertised on addr (default loopback).
func openNomadCluster(ctx context.Context, dir string, log io.Writer, addr string) (nomadCluster, error) {
	bin, err := nomadBinary()
	if err != nil {
		return nomadCluster{}, err
	}
	if os.Getenv("NOMAD_ADDR") != "" {
		cfg, join, err := teamNomadConfig(os.Getenv)
		if err != nil {
			return nomadCluster{}, err
		}
		client, err := nomadapi.NewClient(cfg)
		if err != nil {
			return nomadCluster{}, fmt.Errorf("nomad: %w", err)
		}
		return nomadCluster{client: client, bin: bin, join: join, stop: func() {}}, nil
	}
	fleet, err := nomadlocal.OpenFleet(filepath.Join(dir, rundir.NomadDir, "fleet"))
	if err != nil {
		return nomadCluster{}, err
	}
	server, err := nomadlocal.StartServer(ctx, nomadlocal.ServerOptions{Bin: bin, Dir: filepath.Join(dir, rundir.NomadDir, "server"),
		Fleet: fleet, Addr: addr, FreePort: nomadlocal.FreePort})
	if err != nil {
		return nomadCluster{}, err
	}
	if server.Adopted {
		fmt.Fprintf(log, "resume: the Nomad server of the driver that died still runs (%s): this driver takes it over\n", server.Addr)
	}
	client, err := server.Client()
	if err != nil {
		server.Stop()
		return nomadCluster{}, err
	}
	return nomadCluster{client: client, bin: bin, join: fleet.Join(), stop: server.Stop, own: true}, nil
}

// teamNomadConfig is how the nomad CLI reaches the cluster of a team, read from the same
// variables: NOMAD_ADDR, NOMAD_REGION, NOMAD_NAMESPACE, NOMAD_TOKEN, NOMAD_HTTP_AUTH,
// NOMAD_CACERT, NOMAD_CAPATH, NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY, NOMAD_TLS_SERVER_NAME and
// NOMAD_SKIP_VERIFY; a half-given certificate or an unreadable NOMAD_SKIP_VERIFY is an error
// here rather than a refusal by the cluster later. The agents rubberband starts for that
// cluster (local ones, EC2 instances) join it with the same CA, certificate and key, and with
// ACLs when there is a token.
func teamNomadConfig(getenv func(string) string) (*nomadapi.Config, nomadlocal.Join, error) {
	cfg := &nomadapi.Config{Address: getenv("NOMAD_ADDR"), Region: getenv("NOMAD_REGION"), Namespace: getenv("NOMAD_NAMESPACE"),
		SecretID: getenv("NOMAD_TOKEN"), TLSConfig: &nomadapi.TLSConfig{CACert: getenv("NOMAD_CACERT"), CAPath: getenv("NOMAD_CAPATH"),
			ClientCert: getenv("NOMAD_CLIENT_CERT"), ClientKey: getenv("NOMAD_CLIENT_KEY"), TLSServerName: getenv("NOMAD_TLS_SERVER_NAME")}}
	if auth := getenv("NOMAD_HTTP_AUTH"); auth != "" {
		user, password, _ := strings.Cut(auth, ":")
		cfg.HttpAuth = &nomadapi.HttpBasicAuth{Username: user, Password: password}
	}
	if v := getenv("NOMAD_SKIP_VERIFY"); v != "" {
		skip, err := strconv.ParseBool(v)
		if err != nil {
			return nil, nomadlocal.Join{}, inputErr("NOMAD_SKIP_VERIFY=%q is not a boolean", v)
		}
		cfg.TLSConfig.Insecure = skip
	}
	if (cfg.TLSConfig.ClientCert == "") != (cfg.TLSConfig.ClientKey == "") {
		return nil, nomadlocal.Join{}, inputErr("NOMAD_CLIENT_CERT and NOMAD_CLIENT_KEY go together: set both or neither")
	}
	join := nomadlocal.Join{TLS: nomadlocal.TLS{CA: cfg.TLSConfig.CACert, Cert: cfg.TLSConfig.ClientCert, Key: cfg.TLSConfig.ClientKey},
		ACL: cfg.SecretID != ""}
	return cfg, join, nil
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
