// Package nomad is the executor's Runtime on a Nomad cluster. A gang is one batch job with one
// task group per worker, each pinned by constraint to the node placement chose (placement stays
// rubberband's, so a gang is whole or not submitted: the job is planned first and registered only
// when the scheduler can place every group); `raw_exec` runs trainer.command through the
// `rubberband worker` wrapper, which restores and saves the trial's checkpoint on the node.
// Reports are read from rank 0's logs through the API; failures from allocation states. When a
// gang has ended every worker's output is copied into the trial's log, and the job is purged.
package nomad

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/rubberband-hpo/rubberband/trial"
)

// ImageBinary is where a trainer image holds the rubberband binary, whose `worker` wrapper
// restores and saves checkpoints inside the container.
const ImageBinary = "/rubberband"

// NodeMeta is the client meta key that names a node, so that a task group can be pinned to it.
const NodeMeta = "rb_node"

// SaveMargin is how long a stopped worker's wrapper has, after the trainer's grace period, to
// save the checkpoint before Nomad kills it: the task's kill timeout is the grace period plus
// this (Nomad clients cap kill timeouts at their max_kill_timeout, 30 s by default).
const SaveMargin = 15 * time.Second

// Runtime launches gangs as Nomad jobs.
type Runtime struct {
	Client *nomad.Client
	// Experiment and RunID tag the jobs; Reap matches the run ID, so that resuming one run never
	// touches another run of the same spec.
	Experiment string
	RunID      string
	// HeartbeatTimeout is how long a worker goes on without its driver's heartbeat (the driver
	// beats with heartbeat.Beat into the checkpoint store); default heartbeat.DefaultTimeout.
	HeartbeatTimeout time.Duration
	// Self is the rubberband binary on the nodes (raw_exec runs it as the worker wrapper).
	Self string
	// StoreEnv tells the wrapper where checkpoints live (RB_CHECKPOINTS=..., never credentials).
	StoreEnv []string
	// ExtraEnv is added to every worker (RB_TIME_SCALE, say).
	ExtraEnv []string
	// Secrets (KEY=VALUE) reach workers in containers, which inherit nothing from the node: the
	// store's credentials, when the store needs them. They never enter the job: Launch writes
	// them as the Nomad Variable nomad/jobs/<job ID>, which only that job's tasks may read
	// (workload identity), a template renders them into the task's environment, and the
	// variable is deleted with the job.
	Secrets []string
	// LogDir holds each trial's output, LogDir/<trial>.log: every worker's standard output and
	// error, read once from Nomad when the gang has ended, before its job is purged. Empty keeps
	// no logs.
	LogDir string
	// LogMax bounds each trial's log (logcap, default logcap.DefaultMax).
	LogMax int64
	// Grace is how long a stopped trainer has after SIGTERM before SIGKILL (default
	// trial.GracePeriod).
	Grace time.Duration
	// NoticeLead is how long before a spot instance goes its workers stop their trainers when
	// they train through its notice (default the grace and worker.NoticeLead): in compressed
	// time, that times the time scale.
	NoticeLead time.Duration
	// Poll is how often allocation states are read (default 100 ms).
	Poll time.Duration
	// PlaceTimeout bounds how long Launch waits for the gang's nodes to have room for all of it
	// (default 2 minutes): nothing of the gang runs meanwhile. A gang pinned to a node the cluster
	// does not have is refused at once.
	PlaceTimeout time.Duration
	// PinNodeID pins task groups by their client's Nomad node ID (${node.unique.id}), for a
	// team's own clients, which carry no rb_node meta (cloud.Node.ID is then the node ID, as
	// nomadpool gives it). Such a gang also asks for its GPUs as nvidia/gpu devices where the
	// client has some, and runs in its clients' node pool (pool.go).
	PinNodeID bool
	// Code is the ID of the run's code bundle in its checkpoint store (codebundle.Key): each
	// worker runs its trainer in it, unpacked. Empty: in the task's folder.
	Code string
	Log  io.Writer

	mu    sync.Mutex
	ports int
	nodes map[string]nodeFacts // clients looked up, by node ID (PinNodeID)
}

var (
	_ gang.Runtime = (*Runtime)(nil)
	_ gang.Reaper  = (*Runtime)(nil)
)

// Launch places the gang's job whole, registers it and waits until Nomad has placed every
// worker; a gang it cannot place fails with gang.ErrUnplaceable, having started nothing.
func (r *Runtime) Launch(ctx context.Context, g gang.Gang) (gang.Handle, error) {
	job, err := r.job(g)
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	if err := r.onClients(ctx, job, g); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	if err := r.plan(ctx, job); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	if err := r.writeSecrets(ctx, g, *job.ID); err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	if _, _, err := r.Client.Jobs().Register(job, (&nomad.WriteOptions{}).WithContext(ctx)); err != nil {
		r.deleteSecrets(*job.ID)
		return nil, fmt.Errorf("launch %s: register job: %w", g.Trial, err)
	}
	h := &handle{r: r, job: *job.ID, trial: g.Trial, workers: len(g.Workers), target: g.Workers[0].Env.TargetIter, nodes: workerNodes(g), reports: make(chan trial.Report, 64), lastIter: -1,
		exited: make(chan struct{}), done: make(chan struct{}), stop: make(chan struct{})}
	h.header = fmt.Sprintf("=== %s: %d worker(s), iterations %d -> %d, Nomad job %s\n", time.Now().UTC().Format(time.RFC3339),
		len(g.Workers), g.Workers[0].Env.StartIter, g.Workers[0].Env.TargetIter, h.job)
	if err := h.placed(ctx); err != nil {
		h.abandon()
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	go h.watch()
	return h, nil
}

// job describes the gang as a batch job: one task group per worker, pinned to its node, never
// restarted or rescheduled (the executor relaunches a failed gang whole, from its checkpoint).
func (r *Runtime) job(g gang.Gang) (*nomad.Job, error) {
	if len(g.Command) == 0 {
		return nil, fmt.Errorf("trainer.command is empty")
	}
	if len(g.Workers) == 0 {
		return nil, fmt.Errorf("the gang has no workers")
	}
	grace := r.grace()
	kill := grace + SaveMargin
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
			return nil, fmt.Errorf("worker %d: %w", env.Rank, err)
		}
		tg := nomad.NewTaskGroup(fmt.Sprintf("rank-%d", env.Rank), 1)
		tg.Constrain(r.pin(w.Node.ID))
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
		args := append([]string{"worker"}, r.workerOptions(g, grace, id, env.Rank, w.Node, trainer).Args()...)
		task := nomad.NewTask("trainer", "raw_exec").SetConfig("command", self).SetConfig("args", args)
		extra := append(append([]string(nil), r.StoreEnv...), r.ExtraEnv...)
		if g.Image != "" {
			// A container: its entrypoint is the wrapper; it shares the node's network (rank 0's
			// rendezvous and the store on loopback), and gets what a process would inherit.
			task = nomad.NewTask("trainer", "docker").SetConfig("image", g.Image).SetConfig("entrypoint", []string{self}).
				SetConfig("args", args).SetConfig("network_mode", "host")
			if len(r.Secrets) > 0 {
				task.Templates = []*nomad.Template{secretsTemplate(id)}
			}
		}
		task.Env = map[string]string{}
		for _, kv := range append(extra, vars...) {
			k, v, _ := strings.Cut(kv, "=")
			task.Env[k] = v
		}
		declared := make([]string, 0, len(g.Env))
		for k, v := range g.Env {
			task.Env[k] = v
			declared = append(declared, k)
		}
		if len(declared) > 0 { // the wrapper passes these on to the trainer, and no other
			sort.Strings(declared)
			task.Env[trial.TrainerEnvVar] = strings.Join(declared, ",")
		}
		// SIGTERM, as the trainer contract says (raw_exec's default is SIGINT); the wrapper passes
		// it on and kills the trainer itself after the grace period, so that it can still save.
		task.KillSignal = "SIGTERM"
		task.KillTimeout = &kill
		task.Require(&nomad.Resources{CPU: intPtr(or(g.CPUMHz, 500)), MemoryMB: intPtr(or(g.MemoryMB, 512))})
		tg.AddTask(task)
		job.AddTaskGroup(tg)
	}
	return job, nil
}

func workerNodes(g gang.Gang) []string {
	out := make([]string, len(g.Workers))
	for i, w := range g.Workers {
		out[i] = w.Node.ID
	}
	return out
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

func (r *Runtime) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return trial.GracePeriod
}

func (r *Runtime) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return 100 * time.Millisecond
}

// watchdogArgs adds what lets a worker stop by itself when its driver is gone: the run's
// heartbeat to watch, and the launch's deadline, with a margin so that the driver, while it
// lives, stops the gang first.
// workerOptions are what the worker of rank on node runs: the trainer under the gang's
// watchdogs (the driver's heartbeat, the launch's deadline, a spot node's notice).
func (r *Runtime) workerOptions(g gang.Gang, grace time.Duration, gang string, rank int, node cloud.Node, trainer []string) worker.Options {
	o := worker.Options{Trial: g.Trial, Rank: rank, Gang: gang, Grace: grace, SpotNotices: node.Market == cloud.Spot, Command: trainer, Code: r.Code}
	if o.SpotNotices {
		o.Node, o.Lead = node.ID, r.NoticeLead // its notice goes to the driver under this ID (spotnotice)
	}
	if r.RunID != "" {
		o.RunID, o.HeartbeatTimeout = r.RunID, cmp.Or(r.HeartbeatTimeout, heartbeat.DefaultTimeout)
	}
	if g.Timeout > 0 {
		o.Timeout = g.Timeout + 2*grace + time.Minute
	}
	return o
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
	// Secrets of jobs a dead driver launched, whether or not their jobs are still there.
	vars, _, err := r.Client.Variables().PrefixList(secretsPath(r.jobPrefix()), (&nomad.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("reap: list secrets: %w", err)
	}
	for _, v := range vars {
		if _, err := r.Client.Variables().Delete(v.Path, (&nomad.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("reap: delete %s: %w", v.Path, err)
		}
	}
	return nil
}

// secretsPath is the Nomad Variable that holds a job's secrets: under nomad/jobs/<job ID>, the
// job's own tasks may read it without an ACL policy.
func secretsPath(jobID string) string { return "nomad/jobs/" + jobID }

// secretsTemplate renders the job's secrets variable into its task's environment, from Nomad's
// in-memory secrets directory.
func secretsTemplate(jobID string) *nomad.Template {
	data := `{{ with nomadVar "` + secretsPath(jobID) + `" }}{{ range $k, $v := . }}{{ $k }}={{ $v }}` + "\n" + `{{ end }}{{ end }}`
	return &nomad.Template{EmbeddedTmpl: &data, DestPath: strPtr("secrets/rubberband.env"), Envvars: boolPtr(true), ChangeMode: strPtr("noop")}
}

// writeSecrets writes the secrets of an image gang's job, when there are any.
func (r *Runtime) writeSecrets(ctx context.Context, g gang.Gang, jobID string) error {
	if g.Image == "" || len(r.Secrets) == 0 {
		return nil
	}
	items := nomad.VariableItems{}
	for _, kv := range r.Secrets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("a secret that is not KEY=VALUE (its key: %q)", k)
		}
		items[k] = v
	}
	if _, _, err := r.Client.Variables().Create(&nomad.Variable{Path: secretsPath(jobID), Items: items}, (&nomad.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("write the job's secrets as a Nomad Variable: %w", err)
	}
	return nil
}

// deleteSecrets deletes a job's secrets variable, if it has one (best effort: a variable of a
// job that is gone grants nothing, and Reap deletes those a dead driver left).
func (r *Runtime) deleteSecrets(jobID string) {
	if len(r.Secrets) > 0 {
		r.Client.Variables().Delete(secretsPath(jobID), nil)
	}
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
