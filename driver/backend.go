package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/open"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/local"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/process"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
)

// The backends a run can use, by name (their Kinds say what each is and can do).
const (
	Local   = "local"   // virtual nodes on this machine, trainers as processes
	Nomad   = "nomad"   // NOMAD_ADDR's cluster (or one started here), or a team's clients (cluster.nomad)
	EC2     = "ec2"     // EC2 instances as Nomad clients
	Virtual = "virtual" // nodes and trainers in virtual time (docs/virtual.md)
	Kube    = "kube"    // pods on a Kubernetes cluster, on a team's node pool or Karpenter's nodes
)

// ErrInput matches the errors of input a user must change: a backend that cannot run the spec,
// a run another driver holds, an unknown backend.
var ErrInput = errors.New("bad input")

// inputError is an error that says what to do in its own words and matches ErrInput.
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInput }

func inputErr(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// Backend is a run's provider and runtime, the kind of backend they are, and what stops what
// was started for them.
type Backend struct {
	Provider cloud.Provider // nil where the caller makes its nodes (profile on local)
	Runtime  gang.Runtime
	Kind     Kind
	close    []func()
}

// Close stops what Open started, the last first.
func (b *Backend) Close() {
	for i := len(b.close) - 1; i >= 0; i-- {
		b.close[i]()
	}
}

// target is what a backend is opened for: a run's experiment and plan, its ID, its state (or
// scratch) directory, its time scale, and where its messages go.
type target struct {
	exp       *spec.Experiment
	dir       string
	runID     string
	timeScale float64
	alloc     sim.Alloc
	self      string // the rubberband binary, which workers run
	log       io.Writer
	// layout is where the run keeps its checkpoint keys (its run.json's); a profile's scratch
	// store, its own already, keeps them at its root.
	layout string
	// served and sandbox are the run's (rundir.RunFile): a server's run gets none of the
	// driver's credentials; the local backend runs its trainers as sandbox, when set.
	served  bool
	sandbox *process.Sandbox
	logMax  int64 // the bound of each trial's log (logcap; 0: its default)
	// code is the ID of the trainer's code bundle in the run's store (shipCode), for the
	// workers of a remote backend.
	code string
}

// checkpoints is the run's checkpoint store: the spec's (the run's folder when it names none),
// under the run's own prefix by its layout.
func (t target) checkpoints() open.Run {
	return open.Run{Checkpoints: t.exp.Checkpoints, Dir: filepath.Join(t.dir, rundir.CheckpointsDir), Tmp: filepath.Join(t.dir, rundir.TmpDir),
		RunID: t.runID, Experiment: t.exp.Name, Layout: t.layout}
}

// defaults fills in the binary workers start (this one) and a log that discards.
func (t *target) defaults() error {
	if t.log == nil {
		t.log = io.Discard
	}
	if t.self != "" {
		return nil
	}
	self, err := os.Executable()
	t.self = self
	return err
}

// Kind is one backend: its name, what --backend's help says of it, what it can do (the
// questions driver, cmd, server and the dashboard ask of a backend, each a field here, so that
// no other place compares a backend's name), what it cannot run, and how it is opened.
type Kind struct {
	Name  string
	Usage string // what it is, in --backend's help
	// LocalTrainers: its trainers run as processes of this machine, children of the driver.
	// The driver adopts what they leave behind (a subreaper), a server can sandbox them (a uid
	// per run), and a profile runs them on the profiler's own nodes, measuring the first wave.
	LocalTrainers bool
	// Remote: its workers run on nodes elsewhere. The trainer's folder ships to them through
	// the run's checkpoint store, and they stop by themselves unless the driver's heartbeat
	// beats there.
	Remote bool
	// SharesNoDisk: its nodes share no disk with this machine at all (not even a local
	// cluster's): a profile's scratch checkpoints go under a prefix of the spec's own store.
	SharesNoDisk bool
	// Simulated: its nodes and trainers exist in virtual time. It needs no checkpoint store and
	// no trainer folder; its run ID comes from the spec and the fault schedule (the same command
	// twice writes the same journal), at a time scale of 1; faults can be injected (--faults);
	// a server does not mirror its runs.
	Simulated bool
	// OutlivesRun: the machines it rents can outlive the run that rented them (`cleanup`
	// terminates them).
	OutlivesRun bool

	check func(exp *spec.Experiment) error
	open  func(ctx context.Context, t target) (*Backend, error)
}

// Kinds is the registry of backends, in the order --backend's help lists them: the one place
// that knows them.
func Kinds() []Kind {
	return []Kind{
		{Name: Local, Usage: "processes on this machine", LocalTrainers: true, check: checkNothing, open: openLocal},
		{Name: Nomad, Usage: "NOMAD_ADDR's cluster, or a local server started for you; with cluster.nomad, the team's own clients: docs/nomad.md",
			Remote: true, check: checkNomad, open: openNomad},
		{Name: EC2, Usage: "EC2 instances as Nomad clients: docs/ec2.md", Remote: true, SharesNoDisk: true, OutlivesRun: true, check: checkEC2, open: openEC2},
		{Name: Kube, Usage: "pods on the Kubernetes cluster of KUBECONFIG (or in-cluster), on a team's node pool or Karpenter's nodes: docs/kubernetes.md",
			Remote: true, check: checkKube, open: openKube},
		{Name: Virtual, Usage: "the run in virtual time, drawn from the spec's model: docs/virtual.md", Simulated: true, check: checkNothing, open: openVirtual},
	}
}

func checkNothing(*spec.Experiment) error { return nil }

// Lookup is the backend called name; an unknown name is an input error that lists them.
func Lookup(name string) (Kind, error) {
	for _, k := range Kinds() {
		if k.Name == name {
			return k, nil
		}
	}
	return Kind{}, inputErr("--backend %q is not a backend (%s)", name, Names(nil))
}

// Names lists the backends keep accepts (every one when keep is nil), as a sentence would:
// "local, nomad, ec2, kube or virtual".
func Names(keep func(Kind) bool) string {
	var names []string
	for _, k := range Kinds() {
		if keep == nil || keep(k) {
			names = append(names, k.Name)
		}
	}
	return sentence(names)
}

// Usage is --backend's help: every backend, with what it is.
func Usage() string {
	var parts []string
	for _, k := range Kinds() {
		parts = append(parts, k.Name+" ("+k.Usage+")")
	}
	return sentence(parts)
}

// sentence joins items with commas and a last "or".
func sentence(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// Check says, before anything is planned or rented, why backend cannot run exp.
func Check(backend string, exp *spec.Experiment) error {
	k, err := Lookup(backend)
	if err != nil {
		return err
	}
	return k.check(exp)
}

// Open builds the provider and runtime of the run in st, on its backend; its messages go to
// log. The workers of a remote backend can outlive this driver: they watch the heartbeat Open
// starts beating into the checkpoint store, until Close.
func Open(ctx context.Context, st *rundir.State, log io.Writer) (*Backend, error) {
	return openRun(ctx, st, log, 0)
}

// openRun is Open with each trial's log bounded at logMax bytes (logcap; 0: its default).
func openRun(ctx context.Context, st *rundir.State, log io.Writer, logMax int64) (*Backend, error) {
	k, err := Lookup(st.Run.Backend)
	if err != nil {
		return nil, err
	}
	return openBackend(ctx, k, target{exp: st.Exp, dir: st.Dir, runID: st.Run.RunID, timeScale: st.Run.TimeScale, alloc: st.Alloc, log: log, logMax: logMax,
		layout: st.Run.CheckpointLayout, served: st.Run.Served, sandbox: st.Run.Sandbox})
}

// OpenProfiling builds backend's runtime, and its provider but on local, for a profile of exp's
// trainer at each of gpus (package profiler) with scratch state in dir; it returns the
// experiment to profile. The checkpoints are scratch too: in dir, or on ec2 (whose instances
// share no disk with this machine) under a prefix of the profile's own in the spec's S3 store.
// On local the trainer's command runs as processes, on the profiler's own virtual nodes.
func OpenProfiling(ctx context.Context, backend string, exp *spec.Experiment, dir string, timeScale float64, gpus []int, log io.Writer) (*Backend, *spec.Experiment, error) {
	scratch := *exp
	peak, per := 0, max(exp.Cluster.GPUsPerNode, 1) // nodes at once: the largest GPU count's
	for _, g := range gpus {
		peak = max(peak, (g+per-1)/per)
	}
	k, err := Lookup(backend)
	if err != nil {
		return nil, nil, err
	}
	t := target{exp: &scratch, dir: dir, runID: journal.NewRunID(time.Now(), rand.Uint32()), timeScale: timeScale, alloc: sim.Alloc{{{Nodes: peak}}}, log: log}
	if k.SharesNoDisk {
		scratch.Checkpoints.URL = strings.TrimSuffix(exp.Checkpoints.URL, "/") + "/rubberband-profile/" + t.runID
	} else {
		scratch.Checkpoints = spec.Checkpoints{}
	}
	if k.LocalTrainers {
		scratch.Trainer.Image = ""
		if err := t.defaults(); err != nil {
			return nil, nil, err
		}
		rt, err := localRuntime(ctx, t)
		if err != nil {
			return nil, nil, err
		}
		return &Backend{Runtime: rt, Kind: k, close: []func(){func() { rt.Close() }}}, &scratch, nil
	}
	b, err := openBackend(ctx, k, t)
	return b, &scratch, err
}

func openBackend(ctx context.Context, k Kind, t target) (*Backend, error) {
	if err := t.defaults(); err != nil {
		return nil, err
	}
	var store checkpoint.Store // none for a simulated backend: its trainers are simulated
	if !k.Simulated {
		// Claimed before anything is rented or run: a store whose run prefix holds another
		// run's keys is refused here.
		var err error
		if store, err = t.checkpoints().Open(ctx); err != nil {
			return nil, err
		}
	}
	if k.Remote && t.exp.ShipsCode() {
		// Remote workers share no disk with this machine: the trainer's folder goes with the
		// run, through its store.
		var err error
		if t.code, err = shipCode(ctx, store, t.exp.Trainer.Workdir, t.dir, t.log); err != nil {
			return nil, err
		}
	}
	b, err := k.open(ctx, t)
	if err != nil {
		return nil, err
	}
	b.Kind = k
	if k.Remote {
		// Remote workers and nodes stop by themselves without this heartbeat.
		beat, stop := context.WithCancel(context.WithoutCancel(ctx))
		go heartbeat.Beat(beat, nil, store, t.runID, heartbeat.Every, func(err error) { fmt.Fprintln(t.log, err) })
		b.close = append(b.close, stop)
	}
	return b, nil
}

// localRuntime runs gangs as processes of this machine, with the run's checkpoint store, work
// and logs under its directory (made private) and its time scale.
func localRuntime(ctx context.Context, t target) (*process.Runtime, error) {
	for _, sub := range []string{rundir.LogsDir, rundir.WorkDir} {
		if err := rundir.Mkdir(filepath.Join(t.dir, sub)); err != nil {
			return nil, err
		}
	}
	store, err := t.checkpoints().Open(ctx)
	if err != nil {
		return nil, err
	}
	return &process.Runtime{Store: store, WorkDir: filepath.Join(t.dir, rundir.WorkDir), LogDir: filepath.Join(t.dir, rundir.LogsDir), LogMax: t.logMax, Self: t.self,
		Trainer: trainerBinary(t.self), ExtraEnv: []string{"RB_TIME_SCALE=" + strconv.FormatFloat(t.timeScale, 'g', -1, 64)}, Log: t.log,
		Sandbox: t.sandbox, Cgroup: "rubberband-" + t.runID}, nil
}

// openLocal rents virtual nodes of this machine (with the spec's latencies, spot interruptions
// and slow nodes emulated, billed as the plan bills them) and runs gangs as processes.
func openLocal(ctx context.Context, t target) (*Backend, error) {
	m, err := sim.NewModel(t.exp)
	if err != nil {
		return nil, err
	}
	runtime, err := localRuntime(ctx, t)
	if err != nil {
		return nil, err
	}
	var spot *local.SpotEmulation
	var more []local.Kind // every other instance type and market the spec offers
	for i, o := range m.Offers {
		// Spot nodes are interrupted as the plan expects: the driver hears of the notice and
		// trains through it, and the node's gangs stop (saving) when it goes. Every spot offer
		// follows the one spot block.
		if o.Spot != nil && spot == nil {
			spot = &local.SpotEmulation{Model: o.Spot, Notice: t.exp.Cluster.Spot.Notice.D(), Seed: uint64(t.exp.Seed),
				Notify: func(_, notice string) { fmt.Fprintln(t.log, notice) }, Stop: runtime.InterruptNode}
		}
		if i > 0 {
			more = append(more, local.Kind{Offer: offerOf(t.exp, o), GPUsPerNode: o.GPUsPerNode, Scale: o.Scale, Init: o.Init, Data: o.DataLatency,
				Slow: slowNodes(o, t.exp.Seed)})
		}
	}
	provider, err := local.New(local.Config{StateFile: filepath.Join(t.dir, rundir.NodesFile), GPUsPerNode: t.exp.Cluster.GPUsPerNode, More: more,
		Scale: m.Scale, Init: m.Init, Data: m.DataLatency, Offer: offerOf(t.exp, m.Offer), TimeScale: t.timeScale, Spot: spot, Slow: slowNodes(m.Offer, t.exp.Seed),
		Rand: rand.New(rand.NewPCG(uint64(t.exp.Seed), uint64(time.Now().UnixNano())))})
	if err != nil {
		runtime.Close()
		return nil, err
	}
	return &Backend{Provider: provider, Runtime: runtime, close: []func(){func() { runtime.Close() }, func() { provider.Close() }}}, nil
}

// slowNodes emulates an offer's persistent stragglers (profile.slow_nodes) on the local backend,
// seeded by the run: the plan expects them, so the run should meet them.
func slowNodes(o *sim.Offer, seed int64) *local.SlowEmulation {
	if o.SlowShare <= 0 || o.SlowFactor <= 1 {
		return nil
	}
	return &local.SlowEmulation{Share: o.SlowShare, Factor: o.SlowFactor, Seed: uint64(seed)}
}

// trainerBinary is the small binary of the built-in trainers beside the CLI's, when it is there
// (make build puts it there): launches start faster than from the whole CLI.
func trainerBinary(self string) string {
	p := filepath.Join(filepath.Dir(self), "rubberband-trainer")
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// offerOf is the kind of node one of the model's offers rents, at the price the model bills.
func offerOf(exp *spec.Experiment, o *sim.Offer) cloud.Offer {
	typ := o.Type
	if typ == "" {
		typ = exp.Cluster.InstanceType
	}
	return cloud.Offer{InstanceType: typ, Market: cloud.Market(o.Market), PricePerHour: o.NodePricePerSecond * 3600}
}

// shipCode puts the bundle of the trainer's folder workdir into the run's store
// (codebundle.Key, under the run's prefix) unless it is there already (a resumed run's), and
// returns its ID, leaving out the run's state directory stateDir; none without a folder (a run of before trainer.workdir, or a server's run sent
// without code).
func shipCode(ctx context.Context, store checkpoint.Store, workdir, stateDir string, log io.Writer) (string, error) {
	if workdir == "" {
		return "", nil
	}
	m, err := codebundle.Scan(workdir, codebundle.Limits{}, stateDir) // a --state inside it is the run's, not code
	if err != nil {
		return "", inputErr("%v", err)
	}
	key := codebundle.Key(m.SHA256)
	if have, err := store.List(ctx, key); err != nil {
		return "", err
	} else if len(have) > 0 && have[0].Key == key {
		return m.SHA256, nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(m.Write(pw)) }()
	_, err = store.Put(ctx, key, pr)
	pr.CloseWithError(err) // the writer stops, should Put have failed early
	if err != nil {
		return "", fmt.Errorf("ship the trainer's code to the checkpoint store: %w", err)
	}
	fmt.Fprintf(log, "rubberband: trainer code %s: %d files, %s, shipped to the run's checkpoint store (%s)\n", workdir, len(m.Files), codebundle.HumanSize(m.Bytes), m.SHA256[:12])
	return m.SHA256, nil
}
