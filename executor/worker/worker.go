package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/checkpoint/open"
	"github.com/rubberband-hpo/rubberband/executor/cloud/ec2/nodeagent"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
	"github.com/rubberband-hpo/rubberband/executor/spotnotice"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/internal/syncio"
	"github.com/rubberband-hpo/rubberband/trial"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
)

// AbortSignal is what the runtime sends a worker when another worker of its gang failed: it
// stops its trainer as on SIGTERM but saves no checkpoint, since a failed gang keeps none (the
// Runtime contract). AbortSignalName is its name in Nomad's API.
const (
	AbortSignal     = syscall.SIGUSR1
	AbortSignalName = "SIGUSR1"
)

// Exit codes of a worker besides the trainer's own (and 1 for its own failures, 2 for a bad
// command line).
const (
	// ExitWatchdog: the worker stopped its trainer by itself, past the launch's deadline or
	// without the driver's heartbeat (as timeout(1) exits). The checkpoint is saved.
	ExitWatchdog = 124
	// ExitInterrupted: the worker stopped its trainer because its node is being taken away (a
	// spot interruption notice; EX_TEMPFAIL). The checkpoint is saved; the runtime stops the rest
	// of the gang as by Stop, so that nothing it reached is lost.
	ExitInterrupted = 75
	// ExitInfra: the checkpoint could not be restored or saved for a fault of the infrastructure
	// (a full disk, a store down or refusing writes; EX_IOERR), or the trainer failed with its
	// disk full. Its standard error says what and where ("infrastructure fault: ..."): no try of
	// the trial's, the run pauses.
	ExitInfra = 74
)

// InfraPrefix starts the line of a worker's standard error that says which infrastructure fault
// it exited ExitInfra for: "infrastructure fault: WHAT at WHERE: ...".
const InfraPrefix = "infrastructure fault: "

// infraExit is ExitInfra and err said as a fault, when err is one; else code and err.
func infraExit(code int, err error) (int, error) {
	if fault, ok := infra.Is(err); ok {
		return ExitInfra, fmt.Errorf("%s%w", InfraPrefix, fault)
	}
	return code, err
}

// GPUDevicesEnv is set in a worker's environment when Nomad assigned its GPUs as nvidia/gpu
// devices: the worker then gives the trainer those GPUs (NVIDIA_VISIBLE_DEVICES, which Nomad's
// device plugin sets) as CUDA_VISIBLE_DEVICES, not placement's numbers, which mean nothing to
// Nomad and could name a GPU another job of the team holds.
const GPUDevicesEnv = "RB_NOMAD_GPU_DEVICES"

// GangFile is kept in a checkpoint the worker saves: the ID of the gang whose rank 0 saved it.
// The workers of a gang restore on their own nodes at their own pace, and one that starts after
// rank 0 has finished and saved must not take that version (it would find the trial at its
// target and train nothing) but the one the gang started from.
const GangFile = ".rubberband-gang"

// Options are one worker's: its place in the gang, its watchdogs and its trainer. The
// checkpoint store is the one its environment names (open.FromEnv), the trainer's other
// settings the contract's variables in its environment.
type Options struct {
	Trial string
	Rank  int
	Gang  string        // the ID of this launch of the trial, shared by its workers (the Nomad job)
	Grace time.Duration // how long the trainer has after SIGTERM before it is killed (trial.GracePeriod if 0)
	// RunID, when set, has the worker watch its driver's heartbeat in the checkpoint store and
	// stop the trainer after HeartbeatTimeout (heartbeat.DefaultTimeout if 0) without one.
	RunID            string
	HeartbeatTimeout time.Duration
	Timeout          time.Duration // the launch's deadline; 0: none
	// SpotNotices has the worker watch IMDSv2 (at IMDSEndpoint; the SDK's default if empty)
	// every SpotPoll (1 s if 0) for an interruption notice. With RunID and Node it gives the
	// notice to the driver (spotnotice) and trains on through it until Lead before EC2 acts
	// (Grace + NoticeLead if 0; the driver moves the gang first, once a replacement is up);
	// otherwise it stops the trainer at once.
	SpotNotices  bool
	Node         string // the node's ID as the driver knows it (the instance ID)
	Lead         time.Duration
	SpotPoll     time.Duration
	IMDSEndpoint string
	Command      []string // the trainer
	// Code is the ID of the run's code bundle (codebundle.Key in the checkpoint store): the
	// trainer runs in it, unpacked once per node under CodeCache (default
	// $TMPDIR/rubberband-code-UID). Empty: in the worker's own folder.
	Code      string
	CodeCache string
	// WorkDir holds the restored checkpoint and temporary files (the Nomad task's directory); a
	// temporary directory if empty.
	WorkDir        string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Run runs one worker and returns its exit code; it says why it failed on Stderr.
func Run(ctx context.Context, o Options) int {
	o.Grace = cmp.Or(o.Grace, trial.GracePeriod)
	o.HeartbeatTimeout = cmp.Or(o.HeartbeatTimeout, heartbeat.DefaultTimeout)
	o.SpotPoll = cmp.Or(o.SpotPoll, time.Second)
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	// The trainer's standard error (copied by os/exec), the relayed reports and the worker's own
	// messages come from several goroutines.
	stderr := &syncio.Writer{W: o.Stderr}
	if o.Stdout == o.Stderr {
		o.Stdout = stderr
	}
	o.Stderr = stderr
	code, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(o.Stderr, "rubberband:", err)
	}
	return code
}

func run(ctx context.Context, o Options) (int, error) {
	if len(o.Command) == 0 {
		return 2, errors.New("worker needs the trainer command after --")
	}
	if o.WorkDir == "" {
		work, err := os.MkdirTemp("", "rb-worker-")
		if err != nil {
			return 1, err
		}
		defer os.RemoveAll(work)
		o.WorkDir = work
	}
	store, err := open.FromEnv(ctx, filepath.Join(o.WorkDir, "tmp"))
	if err != nil {
		return 1, err
	}
	dir := filepath.Join(o.WorkDir, "checkpoint")
	code := ""
	if o.Code != "" {
		cache := cmp.Or(o.CodeCache, filepath.Join(os.TempDir(), fmt.Sprintf("rubberband-code-%d", os.Getuid())))
		code, err = codebundle.Cached(cache, o.Code, codebundle.Limits{}, func() (io.ReadCloser, error) {
			r, _, err := store.Open(ctx, codebundle.Key(o.Code))
			return r, err
		})
		if err != nil {
			return infraExit(1, fmt.Errorf("worker: the trainer's code: %w", err))
		}
	}
	restored, err := restoreGangCheckpoint(ctx, store, o.Trial, dir, o.Gang)
	if err != nil {
		return infraExit(1, fmt.Errorf("worker: restore: %w", err))
	}
	for _, s := range restored.Skipped {
		fmt.Fprintf(o.Stderr, "rubberband: skipped a damaged checkpoint: %v\n", s)
	}
	target, _ := strconv.Atoi(os.Getenv("RB_TARGET_ITER"))
	if rep, ok, err := trial.AtTarget(dir, target); err != nil {
		return 1, fmt.Errorf("worker: %w", err)
	} else if ok { // a result the driver may have missed: report it again, train nothing
		fmt.Fprintf(o.Stderr, "rubberband: the checkpoint is at iteration %d already (target %d): re-reporting instead of training\n", rep.Iter, target)
		if o.Rank == 0 {
			fmt.Fprintln(o.Stdout, trial.StampReport(trial.FormatReport(rep.Iter, rep.Metrics), rep.At))
		}
		return 0, nil
	}
	t, err := start(o, dir, code)
	if err != nil {
		return 1, err
	}
	stopSignals := t.onSignals()
	defer stopSignals()
	watch, endWatch := context.WithCancel(context.WithoutCancel(ctx))
	defer endWatch()
	t.watch(watch, o, store)
	<-t.relayed
	err = t.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return 1, err
	}
	// Saved after a clean exit, and after a stop whatever the exit code: an interrupted gang is
	// relaunched from what it reached. Not when the gang failed.
	if o.Rank == 0 && !t.aborted.Load() && (err == nil || t.stopped.Load()) && !abortMarked(ctx, store, o.Gang) {
		if err := save(context.WithoutCancel(ctx), store, o, dir, t.last); err != nil {
			return infraExit(1, err)
		}
	}
	if reason := t.reason(); reason != nil {
		code := ExitWatchdog
		if t.interrupted.Load() {
			code = ExitInterrupted // the runtime stops the gang, saving, and the driver replaces the node
		}
		return code, fmt.Errorf("worker: %w (checkpoint saved)", reason)
	}
	if exit != nil {
		if full := infra.Full(dir); full != nil { // the trainer met a full disk: not its failure
			full.Err = fmt.Errorf("%w; the trainer failed with it: %w", full.Err, exit)
			return infraExit(1, full)
		}
		return max(exit.ExitCode(), 1), nil
	}
	return 0, nil
}

// AbortKey is the key in the checkpoint store that marks a gang failed, for runtimes that cannot
// send AbortSignal (Kubernetes has no API to signal a container): the runtime writes it before
// it stops the rest of the gang, so that rank 0's worker saves nothing, and deletes it once the
// gang has ended.
func AbortKey(gang string) string { return "gangs/" + gang + "/aborted" }

// abortMarked says whether the runtime marked the gang failed (AbortKey). A store that cannot
// be read says no: the stop is then taken as a stop, as without the mark.
func abortMarked(ctx context.Context, store checkpoint.Store, gang string) bool {
	if gang == "" {
		return false
	}
	r, _, err := store.Open(context.WithoutCancel(ctx), AbortKey(gang))
	if err != nil {
		return false
	}
	r.Close()
	return true
}

// restoreGangCheckpoint restores the trial's newest checkpoint into dir, unless gang's own rank 0
// saved it: then the version before it.
func restoreGangCheckpoint(ctx context.Context, store checkpoint.Store, trialID, dir, gang string) (checkpoint.Restored, error) {
	restored, ok, err := checkpoint.RestoreDir(ctx, store, trialID, dir)
	if err != nil || !ok || gang == "" {
		return restored, err
	}
	if b, _ := os.ReadFile(filepath.Join(dir, GangFile)); string(b) != gang {
		return restored, nil
	}
	before, _, err := checkpoint.RestoreDirBefore(ctx, store, trialID, dir, restored.Info.Key)
	before.Skipped = append(restored.Skipped, before.Skipped...)
	return before, err
}

// save keeps what rank 0 reached: its last report and its gang beside the trainer's files.
func save(ctx context.Context, store checkpoint.Store, o Options, dir string, last *trial.Report) error {
	if last != nil {
		if err := trial.SaveLastReport(dir, *last); err != nil {
			return fmt.Errorf("worker: %w", infra.Classify(err, dir))
		}
	}
	if o.Gang != "" {
		if err := os.WriteFile(filepath.Join(dir, GangFile), []byte(o.Gang), 0o600); err != nil {
			return fmt.Errorf("worker: %w", infra.Classify(err, dir))
		}
	}
	if _, err := checkpoint.SaveDir(ctx, store, o.Trial, dir); err != nil {
		return fmt.Errorf("worker: save checkpoint: %w", err)
	}
	return nil
}

// trainer is the trainer's process and why it was stopped.
type trainer struct {
	cmd     *exec.Cmd
	grace   time.Duration
	stderr  io.Writer
	last    *trial.Report // rank 0's last report; read once relayed is closed
	relayed chan struct{}

	stopped, aborted, interrupted atomic.Bool
	kill                          sync.Once
	mu                            sync.Mutex
	why                           error // what made the worker stop the trainer by itself
}

// start starts the trainer with dir as its checkpoint, in the folder code (the worker's own when
// empty), and relays its reports.
func start(o Options, dir, code string) (*trainer, error) {
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Dir = code
	// What the task's environment holds for the trainer, never the store's credentials the
	// wrapper itself uses (a container's secrets) nor anything else of the node's.
	cmd.Env = append(trial.InheritedEnv(os.Environ()), "RB_CHECKPOINT_DIR="+dir)
	if ids := os.Getenv("NVIDIA_VISIBLE_DEVICES"); ids != "" && os.Getenv(GPUDevicesEnv) != "" {
		// Nomad assigned this task its GPUs: the trainer uses those (the last value wins).
		cmd.Env = append(cmd.Env, "CUDA_VISIBLE_DEVICES="+ids)
	}
	cmd.Stdin, cmd.Stderr = o.Stdin, o.Stderr
	// Its own process group, so that a stop reaches the trainer's children too; and it dies with
	// the worker, should Nomad kill the worker first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("worker: start trainer: %w", err)
	}
	t := &trainer{cmd: cmd, grace: o.Grace, stderr: o.Stderr, relayed: make(chan struct{})}
	go func() { // reports reach the driver through logs: stamp them with when they were printed
		defer close(t.relayed)
		if err := trial.RelayReports(out, o.Stdout, time.Now, func(rep trial.Report) { t.last = &rep }); err != nil {
			fmt.Fprintf(o.Stderr, "rubberband: %v\n", err)
		}
	}()
	return t, nil
}

// stop sends the trainer's process group SIGTERM, and SIGKILL after the grace period: the worker
// kills it itself so that it still has the time to save what a stopped trainer reached. abort
// means the gang failed (nothing is saved); reason, when set, is why the worker stopped it by
// itself.
func (t *trainer) stop(abort bool, reason error) {
	if abort {
		t.aborted.Store(true)
	} else {
		t.stopped.Store(true)
	}
	if reason != nil {
		t.mu.Lock()
		t.why = cmp.Or(t.why, reason)
		t.mu.Unlock()
		fmt.Fprintf(t.stderr, "rubberband: stopping the trainer: %v\n", reason)
	}
	syscall.Kill(-t.cmd.Process.Pid, syscall.SIGTERM)
	t.kill.Do(func() {
		time.AfterFunc(t.grace, func() { syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL) })
	})
}

func (t *trainer) reason() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.why
}

// onSignals passes SIGTERM, SIGINT (a stop) and AbortSignal (the gang failed) on to the
// trainer; the function it returns stops listening.
func (t *trainer) onSignals() func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, AbortSignal)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sig:
				t.stop(s == AbortSignal, nil)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(sig); close(done) }
}

// watch stops the trainer by itself past the launch's deadline, when the driver's heartbeat is
// gone (a driver that died must not leave rented machines training), or when the node's spot
// notice comes; until ctx ends.
func (t *trainer) watch(ctx context.Context, o Options, store checkpoint.Store) {
	if d := o.Timeout; d > 0 {
		deadline := time.AfterFunc(d, func() { t.stop(false, fmt.Errorf("past the launch's deadline of %s", d)) })
		context.AfterFunc(ctx, func() { deadline.Stop() })
	}
	if o.RunID != "" {
		go func() {
			if err := heartbeat.Watch(ctx, nil, store, o.RunID, o.HeartbeatTimeout, min(o.HeartbeatTimeout/4, heartbeat.Every)); err != nil && ctx.Err() == nil {
				t.stop(false, err)
			}
		}()
	}
	if o.SpotNotices {
		say := func(s string) { fmt.Fprintf(o.Stderr, "rubberband: %s\n", s) }
		go func() {
			n, err := nodeagent.WatchSpot(ctx, o.IMDSEndpoint, o.SpotPoll, say, say)
			if err != nil {
				return
			}
			if on := trainOn(n, time.Now(), cmp.Or(o.Lead, t.grace+NoticeLead)); on > 0 && o.RunID != "" && o.Node != "" {
				if err := spotnotice.Give(ctx, store, o.RunID, o.Node, n.String()); err != nil {
					say(fmt.Sprintf("%v: stopping the trainer now", err))
				} else {
					say(fmt.Sprintf("%s: the driver is told; training on for %s, until it moves the gang", n, on.Round(time.Second)))
					select {
					case <-time.After(on):
					case <-ctx.Done():
						return
					}
				}
			}
			t.interrupted.Store(true)
			t.stop(false, errors.New(n.String()))
		}()
	}
}

// NoticeLead is how long before EC2 acts on a spot notice a worker that trains through it stops
// its trainer, beyond the trainer's grace: the time to save and upload the checkpoint.
const NoticeLead = 30 * time.Second

// trainOn is how long a trainer given notice n at now trains on: until lead before EC2 acts; 0
// when that is past or the notice says no time.
func trainOn(n nodeagent.Notice, now time.Time, lead time.Duration) time.Duration {
	at, err := time.Parse(time.RFC3339, n.Time)
	if err != nil {
		return 0
	}
	return max(0, at.Sub(now)-lead)
}
