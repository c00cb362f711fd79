// Package nomad is the executor's Runtime on a Nomad cluster. A gang is one batch job with one
// task group per worker, each pinned by constraint to the node placement chose (placement stays
// rubberband's, so a gang is whole or not submitted); `raw_exec` runs trainer.command through the
// `rubberband worker` wrapper, which restores and saves the trial's checkpoint on the node.
// Reports are read from rank 0's logs through the API; failures from allocation states. Finished
// jobs are purged.
package nomad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/trial"
)

// ImageBinary is where a trainer image holds the rubberband binary, whose `worker` wrapper
// restores and saves checkpoints inside the container.
const ImageBinary = "/rubberband"

// NodeMeta is the client meta key that names a node, so that a task group can be pinned to it.
const NodeMeta = "rb_node"

// Runtime launches gangs as Nomad jobs.
type Runtime struct {
	Client *nomad.Client
	// Experiment and RunID tag the jobs; Reap matches the run ID, so that resuming one run never
	// touches another run of the same spec.
	Experiment string
	RunID      string
	// Self is the rubberband binary on the nodes (raw_exec runs it as the worker wrapper).
	Self string
	// StoreEnv tells the wrapper where checkpoints live (RB_CHECKPOINTS=..., never credentials).
	StoreEnv []string
	// ExtraEnv is added to every worker (RB_TIME_SCALE, say).
	ExtraEnv []string
	// ImageEnv is added to workers in containers, which inherit nothing from the node: the
	// store's credentials, when the store needs them (they are then part of the Nomad job).
	ImageEnv []string
	// Grace is the kill timeout after SIGTERM (default trial.GracePeriod).
	Grace time.Duration
	// Poll is how often allocation states are read (default 100 ms).
	Poll time.Duration
	// PlaceTimeout bounds how long Nomad may take to place a gang (default 2 minutes).
	PlaceTimeout time.Duration
	Log          io.Writer

	mu    sync.Mutex
	ports int
}

// Launch registers the gang's job.
func (r *Runtime) Launch(ctx context.Context, g executor.Gang) (executor.Handle, error) {
	if len(g.Command) == 0 {
		return nil, fmt.Errorf("launch %s: trainer.command is empty", g.Trial)
	}
	grace := r.Grace
	if grace == 0 {
		grace = trial.GracePeriod
	}
	id := fmt.Sprintf("%s%s-%d", r.jobPrefix(), g.Trial, time.Now().UnixNano())
	job := nomad.NewBatchJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	job.Meta = map[string]string{"rb_trial": g.Trial, "rb_experiment": r.Experiment, "rb_run": r.RunID}
	port := r.port()
	zero := 0
	for _, w := range g.Workers {
		env := w.Env
		env.MasterPort = port
		env.CheckpointDir = "" // the wrapper sets it to a directory of the task
		vars, err := env.Vars()
		if err != nil {
			return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
		}
		tg := nomad.NewTaskGroup(fmt.Sprintf("rank-%d", env.Rank), 1)
		tg.Constrain(nomad.NewConstraint("${meta."+NodeMeta+"}", "=", w.Node.ID))
		tg.RestartPolicy = &nomad.RestartPolicy{Attempts: &zero, Mode: strPtr("fail")}
		tg.ReschedulePolicy = &nomad.ReschedulePolicy{Attempts: &zero, Unlimited: boolPtr(false)}
		trainer := append([]string(nil), g.Command...)
		self := r.Self
		if g.Image != "" {
			self = ImageBinary // the image carries the wrapper
		}
		if trainer[0] == "rubberband" {
			trainer[0] = self // the built-in trainers run from the same binary
		}
		args := append([]string{"worker", "--trial", g.Trial, "--rank", strconv.Itoa(env.Rank), "--"}, trainer...)
		task := nomad.NewTask("trainer", "raw_exec").SetConfig("command", self).SetConfig("args", args)
		extra := append(append([]string(nil), r.StoreEnv...), r.ExtraEnv...)
		if g.Image != "" {
			// A container: its entrypoint is the wrapper; it shares the node's network (rank 0's
			// rendezvous and the store on loopback), and gets what a process would inherit.
			task = nomad.NewTask("trainer", "docker").SetConfig("image", g.Image).SetConfig("entrypoint", []string{self}).
				SetConfig("args", args).SetConfig("network_mode", "host")
			extra = append(extra, r.ImageEnv...)
		}
		task.Env = map[string]string{}
		for _, kv := range append(extra, vars...) {
			k, v, _ := strings.Cut(kv, "=")
			task.Env[k] = v
		}
		for k, v := range g.Env {
			task.Env[k] = v
		}
		task.KillTimeout = &grace
		task.Require(&nomad.Resources{CPU: intPtr(or(g.CPUMHz, 500)), MemoryMB: intPtr(or(g.MemoryMB, 512))})
		tg.AddTask(task)
		job.AddTaskGroup(tg)
	}
	if _, _, err := r.Client.Jobs().Register(job, (&nomad.WriteOptions{}).WithContext(ctx)); err != nil {
		return nil, fmt.Errorf("launch %s: register job: %w", g.Trial, err)
	}
	h := &handle{r: r, job: id, trial: g.Trial, workers: len(g.Workers), reports: make(chan trial.Report, 64), lastIter: -1,
		exited: make(chan struct{}), done: make(chan struct{}), stop: make(chan struct{})}
	go h.watch()
	return h, nil
}

// port picks a port for rank 0's rendezvous, distinct for every gang this runtime starts.
func (r *Runtime) port() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ports++
	return 29000 + r.ports%2000
}

func (r *Runtime) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format+"\n", args...)
	}
}

type handle struct {
	r       *Runtime
	job     string
	trial   string
	workers int
	reports chan trial.Report
	exited  chan struct{}
	done    chan struct{}
	stop    chan struct{}
	once    sync.Once
	stopped bool
	result  error

	mu       sync.Mutex
	lastIter int
}

func (h *handle) Reports() <-chan trial.Report { return h.reports }
func (h *handle) Exited() <-chan struct{}      { return h.exited }
func (h *handle) Wait() error                  { <-h.done; return h.result }

// Stop deregisters the job: Nomad sends SIGTERM, then SIGKILL after the kill timeout.
func (h *handle) Stop() {
	h.once.Do(func() { close(h.stop) })
}

// watch follows the job's allocations until all are terminal, streaming rank 0's reports.
func (h *handle) watch() {
	defer close(h.done)
	poll := h.r.Poll
	if poll == 0 {
		poll = 100 * time.Millisecond
	}
	jobs := h.r.Client.Jobs()
	placeBy := time.Now().Add(h.r.PlaceTimeout)
	if h.r.PlaceTimeout == 0 {
		placeBy = time.Now().Add(2 * time.Minute)
	}
	var logs sync.WaitGroup
	streaming := false
	cancel := make(chan struct{})
	failed := ""
	for {
		select {
		case <-h.stop:
			if !h.stopped {
				h.stopped = true
				jobs.Deregister(h.job, false, nil)
			}
		default:
		}
		allocs, _, err := jobs.Allocations(h.job, true, nil)
		if err != nil {
			time.Sleep(poll)
			continue
		}
		terminal, complete := 0, 0
		for _, a := range allocs {
			switch a.ClientStatus {
			case "complete":
				terminal++
				complete++
			case "failed", "lost":
				terminal++
				if failed == "" {
					failed = fmt.Sprintf("task group %s %s on node %s%s", a.TaskGroup, a.ClientStatus, a.NodeName, h.stderrTail(a.ID))
				}
			}
			if !streaming && a.TaskGroup == "rank-0" && (a.ClientStatus == "running" || a.ClientStatus == "complete" || a.ClientStatus == "failed") {
				streaming = true
				logs.Add(1)
				go func(id string) {
					defer logs.Done()
					h.stream(id, cancel)
				}(a.ID)
			}
		}
		if len(allocs) < h.workers && failed == "" && time.Now().After(placeBy) {
			failed = "Nomad did not place the whole gang: " + h.placementFailure()
			h.stopped = true
			jobs.Deregister(h.job, true, nil)
			close(cancel)
			logs.Wait()
			close(h.reports)
			close(h.exited)
			h.result = fmt.Errorf("gang failed: %s", failed)
			return
		}
		if failed != "" && !h.stopped {
			h.stopped = true // a gang is whole or not at all: stop the rest
			jobs.Deregister(h.job, false, nil)
		}
		if len(allocs) >= h.workers && terminal == len(allocs) {
			close(cancel)
			logs.Wait()
			// The live stream may stop short of the end: read the whole log once more and pass on
			// what it missed, so that the last report (the stage's metric) is never lost.
			for _, a := range allocs {
				if a.TaskGroup == "rank-0" {
					h.catchUp(a.ID)
				}
			}
			close(h.reports)
			close(h.exited)
			switch {
			case failed != "" && !errors.Is(h.result, executor.ErrStopped):
				h.result = fmt.Errorf("gang failed: %s", failed)
			case h.stopped && complete < len(allocs):
				h.result = executor.ErrStopped
			}
			if h.stopped && failed == "" {
				h.result = executor.ErrStopped
			}
			jobs.Deregister(h.job, true, nil) // purge
			return
		}
		time.Sleep(poll)
	}
}

// stream reads rank 0's standard output through the API and passes on its reports.
func (h *handle) stream(allocID string, cancel <-chan struct{}) {
	alloc, _, err := h.r.Client.Allocations().Info(allocID, nil)
	if err != nil {
		return
	}
	h.parse(h.frames(alloc, true, cancel))
}

// catchUp reads rank 0's whole standard output and passes on reports beyond the last one sent.
func (h *handle) catchUp(allocID string) {
	alloc, _, err := h.r.Client.Allocations().Info(allocID, nil)
	if err != nil {
		return
	}
	h.parse(h.frames(alloc, false, make(chan struct{})))
}

// frames turns the log stream of rank 0's stdout into a reader.
func (h *handle) frames(alloc *nomad.Allocation, follow bool, cancel <-chan struct{}) io.Reader {
	frames, errs := h.r.Client.AllocFS().Logs(alloc, follow, "trainer", "stdout", "start", 0, cancel, nil)
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					return
				}
				if f != nil {
					pw.Write(f.Data)
				}
			case <-errs:
				return
			case <-cancel:
				// drain what is already buffered, then stop
				for {
					select {
					case f, ok := <-frames:
						if !ok || f == nil {
							return
						}
						pw.Write(f.Data)
					default:
						return
					}
				}
			}
		}
	}()
	return pr
}

// parse passes on the reports in r whose iteration is beyond the last one passed on.
func (h *handle) parse(r io.Reader) {
	trial.ScanReports(r, nil, func(rep trial.Report) {
		h.mu.Lock()
		fresh := rep.Iter > h.lastIter
		if fresh {
			h.lastIter = rep.Iter
		}
		h.mu.Unlock()
		if fresh {
			h.reports <- rep
		}
	}, func(err error) { h.r.logf("trial %s: ignored a malformed report: %v", h.trial, err) })
}

func strPtr(s string) *string { return &s }
func boolPtr(b bool) *bool    { return &b }
func intPtr(i int) *int       { return &i }

func or(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// stderrTail is the end of a failed task's standard error, for the failure message.
func (h *handle) stderrTail(allocID string) string {
	alloc, _, err := h.r.Client.Allocations().Info(allocID, nil)
	if err != nil {
		return ""
	}
	frames, _ := h.r.Client.AllocFS().Logs(alloc, false, "trainer", "stderr", "end", 600, make(chan struct{}), nil)
	var b []byte
	timeout := time.After(2 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok || f == nil {
				return tail(b)
			}
			b = append(b, f.Data...)
		case <-timeout:
			return tail(b)
		}
	}
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	return ": " + s
}

// jobPrefix starts the ID of every job of this run.
func (r *Runtime) jobPrefix() string {
	if r.RunID == "" {
		return "rb-"
	}
	return "rb-" + r.RunID + "-"
}

// Reap stops the jobs of this run that an earlier driver left running.
func (r *Runtime) Reap(ctx context.Context) error {
	jobs, _, err := r.Client.Jobs().List((&nomad.QueryOptions{Prefix: r.jobPrefix()}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	for _, j := range jobs {
		job, _, err := r.Client.Jobs().Info(j.ID, nil)
		if err != nil || job.Meta["rb_run"] != r.RunID || job.Meta["rb_experiment"] != r.Experiment {
			continue
		}
		r.logf("resume: stopping job %s left by the previous driver", j.ID)
		if _, _, err := r.Client.Jobs().Deregister(j.ID, true, nil); err != nil {
			return fmt.Errorf("reap %s: %w", j.ID, err)
		}
	}
	return nil
}

// placementFailure says why Nomad could not place the job, from its evaluations.
func (h *handle) placementFailure() string {
	evals, _, err := h.r.Client.Jobs().Evaluations(h.job, nil)
	if err != nil {
		return err.Error()
	}
	var why []string
	for _, e := range evals {
		for tg, m := range e.FailedTGAllocs {
			for reason, n := range m.ConstraintFiltered {
				why = append(why, fmt.Sprintf("%s: %d node(s) filtered by %s", tg, n, reason))
			}
			if m.NodesEvaluated == 0 {
				why = append(why, tg+": no node available")
			}
		}
	}
	if len(why) == 0 {
		return "no reason given"
	}
	return strings.Join(why, "; ")
}
