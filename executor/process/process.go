package process

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/internal/logcap"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Runtime launches gangs as local processes.
type Runtime struct {
	Store checkpoint.Store
	// WorkDir holds each trial's live checkpoint directory, WorkDir/<trial>/checkpoint.
	WorkDir string
	// LogDir holds each trial's output, LogDir/<trial>.log.
	LogDir string
	// LogMax bounds each trial's log (logcap: one rotation to <trial>.log.1, with a line saying
	// so), default logcap.DefaultMax: a trainer that writes without end cannot fill the disk.
	LogMax int64
	// Self replaces a command's first word when it is "rubberband", so that the built-in
	// trainers run from the same binary as the driver.
	Self string
	// Trainer, when set, is the small binary of the built-in trainers alone
	// (rubberband-trainer): [rubberband, trainer, NAME, ...] runs as [Trainer, NAME, ...], which
	// starts in a few milliseconds where the whole CLI takes tens.
	Trainer string
	// ExtraEnv is added to every worker's environment (RB_TIME_SCALE, say), after the part of
	// the driver's own that trainers inherit (trial.InheritedEnv) and before trainer.env.
	ExtraEnv []string
	// Sandbox, when set, is the identity the workers run as (a server's run on a shared host):
	// see Sandbox. Close ends every process of it.
	Sandbox *Sandbox
	// Cgroup, when set, names a cgroup v2 of the workers' own under the driver's (the run's ID,
	// so that a resumed driver finds a dead one's): where cgroup v2 is writable, every worker
	// starts in it and Reap and Close kill it whole; elsewhere the runtime goes without.
	Cgroup string
	// Grace is how long a stopped worker has before SIGKILL (default trial.GracePeriod).
	Grace time.Duration
	// Log receives what the runtime notices (corrupt checkpoints skipped, malformed reports).
	Log io.Writer
	// IdleTimeout is how long a reused worker (Gang.Reuse) waits for its next trial before it is
	// ended (default 10 s); Close ends the idle ones at once.
	IdleTimeout time.Duration
	// WaitDelay is how long a worker's output is read at most after it exited, when something
	// the runtime could not end still holds it open (default DefaultWaitDelay).
	WaitDelay time.Duration

	pool    pool
	workers workers
	cgMu    sync.Mutex
	cg      *runCgroup // nil where there is none (or not yet)
	cgTried bool       // cg was opened, or could not be

	liveMu sync.Mutex
	live   map[*handle][]string // running gangs, with their workers' nodes
	gone   map[string]string    // nodes InterruptNode took away, and why
}

var (
	_ gang.Runtime = (*Runtime)(nil)
	_ gang.Reaper  = (*Runtime)(nil)
	_ io.Closer    = (*Runtime)(nil)
)

// Launch restores the trial's checkpoint and starts every worker, or none.
func (r *Runtime) Launch(ctx context.Context, g gang.Gang) (gang.Handle, error) {
	if len(g.Command) == 0 {
		return nil, fmt.Errorf("launch %s: the process runtime runs trainer.command (images need the nomad backend)", g.Trial)
	}
	if len(g.Workers) == 0 {
		return nil, fmt.Errorf("launch %s: the gang has no workers", g.Trial)
	}
	if err := r.placeable(g); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	dir := filepath.Join(r.WorkDir, g.Trial, "checkpoint")
	if err := r.restore(ctx, g.Trial, dir); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, infra.Classify(err, dir))
	}
	if err := r.prepareSandbox(dir); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	if rep, ok, err := trial.AtTarget(dir, g.Workers[0].Env.TargetIter); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	} else if ok {
		r.appendLog(g.Trial, fmt.Sprintf("=== %s: the checkpoint is at iteration %d already (target %d): re-reporting its last report instead of training\n",
			time.Now().UTC().Format(time.RFC3339), rep.Iter, g.Workers[0].Env.TargetIter))
		return gang.Reported(rep), nil
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	if err := os.MkdirAll(r.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, infra.Classify(err, r.LogDir))
	}
	logf, err := logcap.Open(filepath.Join(r.LogDir, g.Trial+".log"), r.LogMax, 0o600)
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, infra.Classify(err, r.LogDir))
	}
	h := &handle{r: r, trial: g.Trial, dir: dir, log: logf, logFile: logf, reports: make(chan trial.Report, 64)}
	fmt.Fprintf(h.log, "=== %s: %d worker(s), iterations %d -> %d\n", time.Now().UTC().Format(time.RFC3339), len(g.Workers),
		g.Workers[0].Env.StartIter, g.Workers[0].Env.TargetIter)
	argv := append([]string(nil), g.Command...)
	switch {
	case argv[0] == "rubberband" && len(argv) > 1 && argv[1] == "trainer" && r.Trainer != "":
		argv = append([]string{r.Trainer}, argv[2:]...)
	case argv[0] == "rubberband" && r.Self != "":
		argv[0] = r.Self
	}
	base := r.env()
	for _, k := range sortedKeys(g.Env) {
		base = append(base, k+"="+g.Env[k])
	}
	// A gang is as slow as its slowest node (its workers wait for each other at every step): an
	// emulated straggler slows all of them.
	slowdown := 1.0
	for _, w := range g.Workers {
		slowdown = max(slowdown, w.Node.Slowdown)
	}
	if slowdown > 1 {
		base = append(base, trial.NodeSlowdownVar+"="+strconv.FormatFloat(slowdown, 'g', -1, 64))
	}
	if g.Reuse && len(g.Workers) == 1 {
		env := g.Workers[0].Env
		env.CheckpointDir, env.MasterPort = dir, port
		if err := r.launchReused(h, g.Workers[0].Node.ID, g.Dir, env, argv, base); err != nil {
			h.logFile.Close()
			return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
		}
		r.track(h, g)
		return h, nil
	}
	// Every worker's command is built before any starts: a gang that cannot be described whole
	// (its environment does not encode) starts nothing at all.
	rank0, rank0Out := io.Pipe()
	cmds := make([]*exec.Cmd, len(g.Workers))
	for i, w := range g.Workers {
		env := w.Env
		env.CheckpointDir, env.MasterPort = dir, port
		vars, err := env.Vars()
		if err != nil {
			h.logFile.Close()
			return nil, fmt.Errorf("launch %s: worker %d: %w", g.Trial, env.Rank, err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(append([]string(nil), base...), vars...)
		out := io.MultiWriter(h.log, &h.said)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.Dir = g.Dir // the trainer's folder: relative paths in its command resolve there
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		var out *io.PipeWriter
		if g.Workers[i].Env.Rank == 0 {
			out = rank0Out
		}
		w, err := r.startWorker(cmd, fmt.Sprintf("trial %s worker %d", g.Trial, g.Workers[i].Env.Rank), out, h.log)
		if err != nil {
			rank0.Close() // nobody reads it: its writer must not block
			h.kill()
			return nil, fmt.Errorf("launch %s: start worker %d: %w", g.Trial, g.Workers[i].Env.Rank, err)
		}
		h.workers = append(h.workers, w)
	}
	if err := h.writePIDs(); err != nil {
		rank0.Close()
		h.kill()
		return nil, fmt.Errorf("launch %s: %w", g.Trial, infra.Classify(err, r.WorkDir))
	}
	h.watch(rank0)
	r.track(h, g)
	return h, nil
}

// restore brings the trial's newest checkpoint into dir, unless dir already holds it: a trial
// relaunched where it last ran (placement keeps it there when it can) needs no copy.
func (r *Runtime) restore(ctx context.Context, trialID, dir string) error {
	marker := filepath.Join(filepath.Dir(dir), "checkpoint.version")
	versions, err := r.Store.List(ctx, "trials/"+trialID+"/")
	if err != nil {
		return err
	}
	have, err := os.ReadFile(marker)
	// From here the directory is the gang's: the marker comes back only with a successful save.
	if rmErr := os.Remove(marker); rmErr != nil && !os.IsNotExist(rmErr) {
		return rmErr
	}
	if err == nil && len(versions) > 0 && string(have) == versions[len(versions)-1].SHA256 {
		return nil
	}
	restored, _, err := checkpoint.RestoreDir(ctx, r.Store, trialID, dir)
	if err != nil {
		return err
	}
	for _, skipped := range restored.Skipped {
		r.logf("trial %s: skipped a damaged checkpoint, using the one before: %v", trialID, skipped)
	}
	return nil
}

// appendLog adds a line of the runtime's own to a trial's log.
func (r *Runtime) appendLog(trialID, line string) {
	if os.MkdirAll(r.LogDir, 0o755) != nil {
		return
	}
	if f, err := os.OpenFile(filepath.Join(r.LogDir, trialID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		f.WriteString(line)
		f.Close()
	}
}

func (r *Runtime) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format+"\n", args...)
	}
}

type handle struct {
	r       *Runtime
	trial   string
	dir     string
	log     io.Writer
	logFile *logcap.File
	workers []*worker
	reused  *reused // the process serving this launch, when it is a reused one
	reports chan trial.Report
	// said is the last line the trainers printed: a failure quotes it.
	said lastLine

	mu          sync.Mutex
	stopped     bool
	interrupted *gang.InterruptedError // why the gang was stopped, when its node is going
	failure     error
	last        *trial.Report // rank 0's last report, kept beside the checkpoint
	exited      chan struct{}
	done        chan struct{}
	result      error
}

func (h *handle) Exited() <-chan struct{} { return h.exited }

func (h *handle) Reports() <-chan trial.Report { return h.reports }

// watch reads rank 0's output and waits for every worker; the first failure stops the gang.
func (h *handle) watch(rank0 io.Reader) {
	h.done, h.exited = make(chan struct{}), make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		defer close(h.reports)
		trial.ScanReports(rank0, io.MultiWriter(h.log, &h.said), h.report, h.malformed)
	}()
	var workers sync.WaitGroup
	for i, w := range h.workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			err := w.wait() // closes rank 0's pipe once its output is read
			if i == 0 {
				readers.Wait() // its reports are delivered before the gang ends
			}
			if err != nil && h.recordFailure(h.failedWith(i, err)) {
				h.signal(syscall.SIGTERM) // a gang is whole or not at all
			}
		}()
	}
	go func() {
		workers.Wait()
		h.conclude()
	}()
}

// failedWith is worker i's failure, with the last line the gang's trainers printed.
func (h *handle) failedWith(i int, err error) error {
	if said := h.said.String(); said != "" {
		return fmt.Errorf("worker %d: %w (its last line: %q)", i, err, said)
	}
	return fmt.Errorf("worker %d: %w", i, err)
}

// report delivers one of rank 0's reports, and keeps it as the last.
func (h *handle) report(rep trial.Report) {
	h.mu.Lock()
	h.last = &rep
	h.mu.Unlock()
	h.reports <- rep
}

// malformed notes a report line that could not be read, in the trial's log and the runtime's.
func (h *handle) malformed(err error) {
	fmt.Fprintf(h.log, "rubberband: ignored a malformed report: %v\n", err)
	h.r.logf("trial %s: ignored a malformed report: %v", h.trial, err)
}

// recordFailure keeps a worker's failure, the first one only; first says it is the first and the
// gang was not being stopped, so the rest of it is to be stopped.
func (h *handle) recordFailure(err error) (first bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	first = h.failure == nil && !h.stopped
	if h.failure == nil {
		h.failure = err
	}
	return first
}

// conclude ends the launch once no worker runs it any more: its GPUs are free (Exited), then
// its checkpoint is saved and Wait returns.
func (h *handle) conclude() {
	os.Remove(h.pidFile())
	close(h.exited)
	h.r.untrack(h) // after exited is closed: track skips a gang that has ended
	h.result = h.finish()
	h.logFile.Close()
	close(h.done)
}

// finish saves the checkpoint of a gang that reached its target or was stopped on purpose.
func (h *handle) finish() error {
	h.mu.Lock()
	stopped, failure, last, interrupted := h.stopped, h.failure, h.last, h.interrupted
	h.mu.Unlock()
	if failure != nil && !stopped {
		if full := infra.Full(h.dir); full != nil {
			// A trainer whose disk is full fails writing its checkpoint: the disk's fault, not
			// its own, and no try is spent on it.
			full.Err = fmt.Errorf("%w; the trainer failed with it: %w", full.Err, failure)
			fmt.Fprintf(h.log, "rubberband: gang failed with its disk full: %v\n", full)
			return full
		}
		fmt.Fprintf(h.log, "rubberband: gang failed: %v\n", failure)
		return failure
	}
	// Saving is the runtime's work, not the trainer's: a disk or store that fails it is an
	// infrastructure fault (infra.Classify), which the executor pauses on without spending a try.
	if last != nil {
		if err := trial.SaveLastReport(h.dir, *last); err != nil {
			return fmt.Errorf("save the last report: %w", infra.Classify(err, h.dir))
		}
	}
	info, err := checkpoint.SaveDir(context.Background(), h.r.Store, h.trial, h.dir)
	if err != nil {
		fmt.Fprintf(h.log, "rubberband: could not save the checkpoint: %v\n", err)
		return fmt.Errorf("save checkpoint: %w", err)
	}
	// The directory now holds exactly the newest version: the next launch here can skip restoring.
	os.WriteFile(filepath.Join(filepath.Dir(h.dir), "checkpoint.version"), []byte(info.SHA256), 0o600)
	if interrupted != nil {
		return interrupted
	}
	if stopped {
		return gang.ErrStopped
	}
	return nil
}

func (h *handle) Wait() error {
	<-h.done
	return h.result
}

// Stop sends SIGTERM to every worker's process group, and SIGKILL after the grace period.
func (h *handle) Stop() {
	h.mu.Lock()
	h.stopped = true
	h.mu.Unlock()
	h.signal(syscall.SIGTERM)
}

func (h *handle) signal(sig syscall.Signal) {
	if h.reused != nil {
		h.reused.signal(h, sig)
	} else {
		for _, w := range h.workers {
			syscall.Kill(-w.pid(), sig)
		}
	}
	if sig == syscall.SIGTERM {
		go func() {
			select {
			case <-h.exited:
			case <-time.After(h.r.grace()):
				h.signal(syscall.SIGKILL)
			}
		}()
	}
}

func (r *Runtime) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return trial.GracePeriod
}

// kill ends workers started before a launch failed.
func (h *handle) kill() {
	for _, w := range h.workers {
		syscall.Kill(-w.pid(), syscall.SIGKILL)
		w.wait()
	}
	h.logFile.Close()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
