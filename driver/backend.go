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

// The backends a run can use.
const (
	Local = "local" // virtual nodes on this machine, trainers as processes
	Nomad = "nomad" // NOMAD_ADDR's cluster (or one started here), or a team's clients (cluster.nomad)
	EC2   = "ec2"   // EC2 instances as Nomad clients
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

// Backend is a run's provider and runtime, and what stops what was started for them.
type Backend struct {
	Provider cloud.Provider // nil where the caller makes its nodes (profile on local)
	Runtime  gang.Runtime
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

// kind is a backend: what it cannot run, and how it is opened.
type kind struct {
	check func(exp *spec.Experiment) error
	open  func(ctx context.Context, t target) (*Backend, error)
}

// kindOf is the one place that knows the backends.
func kindOf(name string) (kind, error) {
	switch name {
	case Local:
		return kind{check: func(*spec.Experiment) error { return nil }, open: openLocal}, nil
	case Nomad:
		return kind{check: checkNomad, open: openNomad}, nil
	case EC2:
		return kind{check: checkEC2, open: openEC2}, nil
	case Virtual:
		return kind{check: func(*spec.Experiment) error { return nil }, open: openVirtual}, nil
	}
	return kind{}, inputErr("--backend %q is not a backend (%s, %s, %s or %s)", name, Local, Nomad, EC2, Virtual)
}

// Known says whether name is a backend.
func Known(name string) bool {
	_, err := kindOf(name)
	return err == nil
}

// Check says, before anything is planned or rented, why backend cannot run exp.
func Check(backend string, exp *spec.Experiment) error {
	k, err := kindOf(backend)
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
	return openBackend(ctx, st.Run.Backend, target{exp: st.Exp, dir: st.Dir, runID: st.Run.RunID, timeScale: st.Run.TimeScale, alloc: st.Alloc, log: log, logMax: logMax,
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
	t := target{exp: &scratch, dir: dir, runID: journal.NewRunID(time.Now(), rand.Uint32()), timeScale: timeScale, alloc: sim.Alloc{{{Nodes: peak}}}, log: log}
	if backend == EC2 {
		scratch.Checkpoints.URL = strings.TrimSuffix(exp.Checkpoints.URL, "/") + "/rubberband-profile/" + t.runID
	} else {
		scratch.Checkpoints = spec.Checkpoints{}
	}
	if backend == Local {
		scratch.Trainer.Image = ""
		if err := t.defaults(); err != nil {
			return nil, nil, err
		}
		rt, err := localRuntime(ctx, t)
		if err != nil {
			return nil, nil, err
		}
		return &Backend{Runtime: rt, close: []func(){func() { rt.Close() }}}, &scratch, nil
	}
	b, err := openBackend(ctx, backend, t)
	return b, &scratch, err
}

func openBackend(ctx context.Context, backend string, t target) (*Backend, error) {
	k, err := kindOf(backend)
	if err != nil {
		return nil, err
	}
	if err := t.defaults(); err != nil {
		return nil, err
	}
	if backend == Virtual { // no store: its trainers are simulated
		return k.open(ctx, t)
	}
	// Claimed before anything is rented or run: a store whose run prefix holds another run's
	// keys is refused here.
	store, err := t.checkpoints().Open(ctx)
	if err != nil {
		return nil, err
	}
	if backend != Local && t.exp.ShipsCode() {
		// Remote workers share no disk with this machine: the trainer's folder goes with the
		// run, through its store.
		if t.code, err = shipCode(ctx, store, t.exp.Trainer.Workdir, t.dir, t.log); err != nil {
			return nil, err
		}
	}
	b, err := k.open(ctx, t)
	if err != nil || backend == Local {
		return b, err
	}
	// Remote workers and nodes stop by themselves without this heartbeat.
	beat, stop := context.WithCancel(context.WithoutCancel(ctx))
	go heartbeat.Beat(beat, store, t.runID, heartbeat.Every, func(err error) { fmt.Fprintln(t.log, err) })
	b.close = append(b.close, stop)
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
		// Spot nodes are interrupted as the plan expects: the notice stops their gangs. Every
		// spot offer follows the one spot block.
		if o.Spot != nil && spot == nil {
			spot = &local.SpotEmulation{Model: o.Spot, Notice: t.exp.Cluster.Spot.Notice.D(), Seed: uint64(t.exp.Seed),
				Notify: func(node, notice string) { fmt.Fprintln(t.log, notice); runtime.InterruptNode(node, notice) }}
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
