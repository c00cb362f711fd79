package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
	"github.com/rubberband-hpo/rubberband/executor/cloud/nomadlocal"
	"github.com/rubberband-hpo/rubberband/executor/spotnotice"
	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Environment of the driver that names paths on the AMI (docs/ec2.md); the defaults are
// nodeagent's. Tests point them at binaries of this machine.
const (
	EnvEC2AgentBin = "RB_EC2_AGENT_BIN"
	EnvEC2NomadBin = "RB_EC2_NOMAD_BIN"
	EnvEC2DataDir  = "RB_EC2_DATA_DIR"
	// EnvEC2Shutdown is the command that powers an instance off, when the AMI's is not
	// `shutdown -h now` (a test's fake instances: true, their user-data's exit is the shutdown).
	EnvEC2Shutdown = "RB_EC2_SHUTDOWN"
	// EnvNomadAdvertise is the address the driver's own Nomad server binds and advertises for
	// an ec2 run, when this host's outbound address (nomadlocal.OutboundAddr) is not one the
	// instances route to.
	EnvNomadAdvertise = "RB_NOMAD_ADVERTISE"
)

// ec2NodeTimeout bounds the wait for a running instance's Nomad client: booting, user-data and
// the agent's registration.
const ec2NodeTimeout = 5 * time.Minute

// checkEC2 says what an ec2 run lacks in its spec, before anything is rented: nodes share no
// disk with the driver, so checkpoints must be in S3.
func checkEC2(exp *spec.Experiment) error {
	if exp.Cluster.EC2 == nil {
		return inputErr("--backend ec2 needs a cluster.ec2 block (ami, subnets, ...): see docs/ec2.md")
	}
	if exp.Cluster.InstanceType == "" {
		return inputErr("--backend ec2 needs cluster.instance_type")
	}
	if !strings.HasPrefix(exp.Checkpoints.URL, "s3://") {
		return inputErr("--backend ec2 needs checkpoints in S3 (checkpoints: {url: s3://...}): instances share no disk with this machine")
	}
	return nil
}

// openEC2 rents the run's nodes as EC2 instances whose user-data starts a Nomad client that
// joins the run's Nomad server (NOMAD_ADDR's, or one of its own), and runs gangs through Nomad.
//
// It rents every candidate instance type of the spec (cluster.instance_types, else
// cluster.instance_type alone), each node's user-data telling its agent that type's GPUs.
// Before anything is rented, a preflight (a RunInstances dry run per type and subnet, the vCPU
// quotas for the plan's peak nodes of each type and market) says what would fail.
func openEC2(ctx context.Context, t target) (*Backend, error) {
	exp := t.exp
	if err := checkEC2(exp); err != nil {
		return nil, err
	}
	// A server of our own must be one the instances reach: on this host's outbound address,
	// unless told another (docs/ec2.md). A host without a route out has no instances but its
	// own (a test's fake EC2): loopback, said.
	addr := os.Getenv(EnvNomadAdvertise)
	if addr == "" && os.Getenv("NOMAD_ADDR") == "" {
		var err error
		if addr, err = nomadlocal.OutboundAddr(); err != nil {
			addr = "127.0.0.1"
			fmt.Fprintf(t.log, "ec2: %v: the Nomad server listens on %s, which only instances on this host reach (set %s)\n", err, addr, EnvNomadAdvertise)
		}
	}
	cluster, err := openNomadCluster(ctx, t.dir, t.log, addr)
	if err != nil {
		return nil, err
	}
	client, stop := cluster.client, cluster.stop
	fail := func(err error) (*Backend, error) {
		stop()
		return nil, err
	}
	// The leader's RPC address as the cluster advertises it: what clients join.
	rpc, err := client.Status().Leader()
	if err != nil || rpc == "" {
		return fail(fmt.Errorf("nomad: no server leader (%v)", err))
	}
	// What each instance's agent joins with, in its user-data (docs/ec2.md, "What an instance
	// holds, and who can read it").
	creds, err := nodeagent.ReadCredentials(cluster.join)
	if err != nil {
		return fail(err)
	}
	agentBin := envOr(EnvEC2AgentBin, nodeagent.DefaultAgentBin)
	store, err := t.checkpoints().Env()
	if err != nil {
		return fail(err)
	}
	// One script per type, rendered before anything is rented: the instance learns its ID from
	// IMDS, its GPUs from the script.
	scripts := map[string]string{}
	own, more := ec2Kinds(exp)
	for _, k := range append([]ec2.Kind{own}, more...) {
		script, err := nodeagent.Script(nodeagent.ScriptConfig{AgentBin: agentBin, NomadBin: envOr(EnvEC2NomadBin, nodeagent.DefaultNomadBin),
			DataDir: envOr(EnvEC2DataDir, nodeagent.DefaultDataDir), Server: rpc, GPUs: k.GPUsPerNode, Extra: exp.Cluster.EC2.UserData,
			RunID: t.runID, Watchdog: exp.Cluster.EC2.Watchdog.D(), StoreEnv: store, Shutdown: os.Getenv(EnvEC2Shutdown),
			Driver: taskDriver(exp), Credentials: creds})
		if err != nil {
			return fail(err)
		}
		scripts[k.InstanceType] = script
	}
	// The driver's address, as Nomad's ports on the instances see it: its server's (the
	// cluster's leader).
	driverCIDR, err := ec2.HostCIDR(rpc)
	if err != nil {
		return fail(fmt.Errorf("nomad: the leader's RPC address: %w", err))
	}
	provider, err := ec2.New(ctx, ec2.Config{Experiment: exp.Name, RunID: t.runID, InstanceType: own.InstanceType,
		GPUsPerNode: own.GPUsPerNode, Market: cloud.Market(exp.Cluster.Market),
		OnDemandPrice: own.OnDemandPrice, SpotPrice: own.SpotPrice, More: more,
		EC2: *exp.Cluster.EC2, Spot: exp.Cluster.Spot,
		UserData: func(_ string, k ec2.Kind) (string, error) { return scripts[k.InstanceType], nil },
		Ready: func(ctx context.Context, id string) error {
			ctx, cancel := context.WithTimeout(ctx, ec2NodeTimeout)
			defer cancel()
			return nomadlocal.WaitNodeReady(ctx, client, id, 250*time.Millisecond)
		},
		Drain: func(ctx context.Context, ids []string) { drainNodes(ctx, client, ids) }, Log: t.log, DriverCIDRs: []string{driverCIDR}})
	if err != nil {
		return fail(err)
	}
	// The run's own security group, before the preflight, whose dry runs launch into it.
	group, err := provider.CreateGroup(ctx)
	if err != nil {
		return fail(err)
	}
	closeGroup := func() { deleteGroup(provider, group, t.log) }
	fail = func(err error) (*Backend, error) {
		closeGroup()
		stop()
		return nil, err
	}
	if err := provider.Preflight(ctx, ec2Needs(t.alloc)); err != nil {
		return fail(err)
	}
	// Self is the AMI's rubberband: the job runs on the instance, never the driver's binary.
	rt, err := nomadRuntime(t, client, agentBin)
	if err != nil {
		return fail(err)
	}
	secrets, warning := ec2Credentials(exp, t.served)
	if warning != "" {
		fmt.Fprintln(t.log, warning)
	}
	rt.Secrets = secrets
	// Trained through, a notice leaves a trainer its grace and the time to save; both are spec
	// time, compressed with the run's.
	rt.NoticeLead = time.Duration(float64(trial.GracePeriod+worker.NoticeLead) * t.timeScale)
	// A spot instance's notice is seen on it, by its workers: they give it to the driver through
	// the run's store (spotnotice), and the run trains through it.
	notices, err := t.checkpoints().Open(ctx)
	if err != nil {
		return fail(err)
	}
	src := &spotnotice.Source{Store: notices, RunID: t.runID, Log: t.log}
	// Closed last first: the group once the executor has released the run's instances.
	return &Backend{Provider: noticed{provider, src}, Runtime: rt, close: []func(){stop, closeGroup}}, nil
}

// noticed is a provider whose nodes' spot notices come from elsewhere (their workers, through
// the run's store): the executor hears of them (executor.Noticer) as from a provider that
// passes them on itself.
type noticed struct {
	cloud.Provider
	*spotnotice.Source
}

var _ executor.Noticer = noticed{}

// deleteGroup deletes the run's security group when the run's instances are gone, and says
// why not when some are left (kept nodes, a driver stopping to be resumed): cleanup or the
// run's end deletes it then.
func deleteGroup(p *ec2.Provider, group string, log io.Writer) {
	// Bounded by the provider's group timeout; not by the run's context, which is done by now.
	err := p.DeleteGroup(context.Background())
	var inUse *ec2.GroupInUseError
	switch {
	case errors.As(err, &inUse):
		fmt.Fprintf(log, "rubberband: %v: it goes when they do (the run's end, `rubberband cancel`, `rubberband cleanup --backend ec2`)\n", inUse)
	case err != nil:
		fmt.Fprintf(log, "rubberband: security group %s: %v (`rubberband cleanup --backend ec2` deletes it)\n", group, err)
	}
}

// ec2Credentials are what of this driver's credentials an ec2 run's workers get (the Nomad
// runtime's Secrets), and the warning the run starts with. With an instance profile, nothing:
// instances and their containers use its role. Without one, a trainer image's containers get
// the driver's own keys (they inherit nothing from their instance), and the warning says what
// that costs; unless a server submitted the run (served): the keys are the server's, and its
// containers get none.
func ec2Credentials(exp *spec.Experiment, served bool) (secrets []string, warning string) {
	if exp.Cluster.EC2.InstanceProfile != "" {
		return nil, ""
	}
	warning = "rubberband: warning: cluster.ec2.instance_profile is not set: instances read checkpoints with credentials their AMI must hold"
	switch {
	case exp.Trainer.Image != "" && served:
		warning += ", and the trainer's containers get no credentials (the server's are never handed to a team's containers)"
	case exp.Trainer.Image != "":
		warning += ", and the trainer's containers with this driver's own AWS keys, handed to them as Nomad Variables"
	}
	return storeSecrets(exp, served), warning + "; with an instance profile, instances and containers use its role and the driver's keys never leave this machine (docs/ec2.md)"
}

// ec2Kinds are the instance types an ec2 run rents: the cluster's own (the default type), and
// the spec's other candidates, each with its GPUs per node and prices (the spec's: the planner's
// and the meter's must agree).
func ec2Kinds(exp *spec.Experiment) (own ec2.Kind, more []ec2.Kind) {
	c := exp.Cluster
	own = ec2.Kind{InstanceType: c.InstanceType, GPUsPerNode: c.GPUsPerNode, OnDemandPrice: c.PricePerHour, SpotPrice: c.SpotPricePerHour}
	for _, it := range c.InstanceTypes {
		if it.InstanceType != c.InstanceType {
			more = append(more, ec2.Kind{InstanceType: it.InstanceType, GPUsPerNode: it.GPUsPerNode,
				OnDemandPrice: it.PricePerHour, SpotPrice: it.SpotPricePerHour})
		}
	}
	return own, more
}

// ec2Needs is the most nodes of each instance type and market alloc holds at once: brackets run
// side by side, the stages of one in turn.
func ec2Needs(alloc sim.Alloc) []ec2.Need {
	type offer struct{ typ, market string }
	total := map[offer]int{}
	for _, stages := range alloc {
		peak := map[offer]int{}
		for _, s := range stages {
			o := offer{s.Type, s.Market}
			peak[o] = max(peak[o], s.Spot())
			if s.OnDemand > 0 { // a hedged stage's on-demand nodes, of its type
				od := offer{s.Type, spec.MarketOnDemand}
				peak[od] = max(peak[od], s.OnDemand)
			}
		}
		for o, n := range peak {
			total[o] += n
		}
	}
	out := make([]ec2.Need, 0, len(total))
	for o, n := range total {
		out = append(out, ec2.Need{InstanceType: o.typ, Market: cloud.Market(o.market), Nodes: n})
	}
	// A stable order: the quota error lists the needs as given.
	slices.SortFunc(out, func(a, b ec2.Need) int {
		return cmp.Or(strings.Compare(a.InstanceType, b.InstanceType), strings.Compare(string(a.Market), string(b.Market)))
	})
	return out
}

// drainNodes marks the Nomad nodes of instances about to be terminated for draining: nothing new
// is placed on them. Best effort (see ec2.Config.Drain).
func drainNodes(ctx context.Context, client *nomadapi.Client, ids []string) {
	nodes, _, err := client.Nodes().List((&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return
	}
	for _, n := range nodes {
		if slices.Contains(ids, n.Name) && n.Status == nomadapi.NodeStatusReady {
			client.Nodes().UpdateDrain(n.ID, &nomadapi.DrainSpec{Deadline: 5 * time.Second}, false, (&nomadapi.WriteOptions{}).WithContext(ctx))
		}
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
