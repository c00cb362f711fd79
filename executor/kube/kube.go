package kube

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/rubberband-hpo/rubberband/checkpoint"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/heartbeat"
	"github.com/rubberband-hpo/rubberband/executor/worker"
	"github.com/rubberband-hpo/rubberband/internal/infra"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Labels every pod of a run carries: the run, the trial, the gang (one launch) and the rank.
const (
	LabelRun   = "rubberband.dev/run"
	LabelTrial = "rubberband.dev/trial"
	LabelGang  = "rubberband.dev/gang"
	LabelRank  = "rubberband.dev/rank"
)

// GPUResource is the extended resource of NVIDIA's device plugin.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// ImageBinary is where an image holds the rubberband binary, whose `worker` wrapper restores and
// saves checkpoints inside the pod.
const ImageBinary = "/rubberband"

// SaveMargin is how long a stopped worker's wrapper has, after the trainer's grace period, to
// save the checkpoint before the kubelet kills it: the pods' termination grace period is the
// grace period plus this.
const SaveMargin = 15 * time.Second

// Runtime launches gangs as pods: one per worker, bound to the node placement chose.
type Runtime struct {
	Client    kubernetes.Interface
	Namespace string
	// Experiment and RunID label the pods; Reap matches the run ID, so that resuming one run never
	// touches another's pods.
	Experiment string
	RunID      string
	// HeartbeatTimeout is how long a worker goes on without its driver's heartbeat (default
	// heartbeat.DefaultTimeout).
	HeartbeatTimeout time.Duration
	// Self is the rubberband binary the pods of a command trainer run (its worker wrapper): in
	// RunnerImage, ImageBinary; on nodes that share this machine's files (the test's node
	// agent), this binary's path.
	Self string
	// RunnerImage is the image of a command trainer's pods (cluster.kubernetes.image); an image
	// trainer's pods run its own image, with the wrapper at ImageBinary.
	RunnerImage string
	// StoreEnv tells the wrapper where checkpoints live (RB_CHECKPOINTS=..., never credentials);
	// ExtraEnv is added to every worker (RB_TIME_SCALE, say).
	StoreEnv, ExtraEnv []string
	// Store is the run's checkpoint store, as the workers see it (StoreEnv): a failed gang is
	// marked there (worker.AbortKey) before the rest of it is stopped, so that nothing is saved
	// after a failure; Kubernetes cannot signal a container otherwise than by deleting its pod.
	Store checkpoint.Store
	// Secrets (KEY=VALUE: the store's credentials) reach the workers through the run's Secret
	// (SecretName), created by the first Launch and deleted by Close; never through a pod spec.
	Secrets []string
	// ServiceAccount is what the pods run as (default: the namespace's default); their token is
	// not mounted (trainers need no access to the cluster).
	ServiceAccount string
	// TrainerSecret names a Secret of the namespace whose keys reach the trainer as environment.
	TrainerSecret string
	// LogDir holds each trial's output, LogDir/<trial>.log; LogMax bounds it (logcap).
	LogDir string
	LogMax int64
	// Grace is how long a stopped trainer has after SIGTERM before SIGKILL (default
	// trial.GracePeriod).
	Grace time.Duration
	// PlaceTimeout bounds how long Launch waits for every pod to run (default 2 minutes).
	PlaceTimeout time.Duration
	// Poll is how often pods and nodes are read while a gang runs (default 200 ms), on Clock
	// (default the wall clock: the cluster runs in real time).
	Poll  time.Duration
	Clock clock.Clock
	// Code is the ID of the run's code bundle in its checkpoint store: each worker runs its
	// trainer in it, unpacked.
	Code string
	Log  io.Writer

	mu      sync.Mutex
	ports   int
	secrets bool     // the run's Secret is written
	trainer []string // the keys of TrainerSecret, once read
}

var (
	_ gang.Runtime = (*Runtime)(nil)
	_ gang.Reaper  = (*Runtime)(nil)
)

// SecretName is the run's Secret, which holds the store's credentials for its workers.
func SecretName(runID string) string { return "rb-" + runID + "-secrets" }

// Launch checks that every node of the gang can take its workers, creates one pod per worker
// and waits until all run; a gang it cannot place fails with gang.ErrUnplaceable, with none of
// its pods left.
func (r *Runtime) Launch(ctx context.Context, g gang.Gang) (gang.Handle, error) {
	if len(g.Command) == 0 {
		return nil, fmt.Errorf("launch %s: trainer.command is empty", g.Trial)
	}
	if len(g.Workers) == 0 {
		return nil, fmt.Errorf("launch %s: the gang has no workers", g.Trial)
	}
	rank0, err := r.fits(ctx, g)
	if err != nil {
		return nil, r.forbidden(fmt.Errorf("launch %s: %w", g.Trial, err))
	}
	if err := r.writeSecrets(ctx); err != nil {
		return nil, r.forbidden(fmt.Errorf("launch %s: %w", g.Trial, err))
	}
	keys, err := r.trainerKeys(ctx)
	if err != nil {
		return nil, r.forbidden(fmt.Errorf("launch %s: %w", g.Trial, err))
	}
	id := r.gangID(g.Trial)
	pods, err := r.pods(g, id, rank0, keys)
	if err != nil {
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	h := newHandle(r, g, id, pods)
	for _, p := range pods {
		if _, err := r.Client.CoreV1().Pods(r.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			h.deleteAll(0)
			h.waitGone(context.WithoutCancel(ctx))
			if forbidden(err) { // no retry helps: the run pauses and says which permission
				return nil, r.forbidden(fmt.Errorf("launch %s: create pod %s on node %s: %w", g.Trial, p.Name, p.Spec.NodeName, err))
			}
			return nil, fmt.Errorf("launch %s: create pod %s on node %s: %w: %w", g.Trial, p.Name, p.Spec.NodeName, gang.ErrUnplaceable, err)
		}
	}
	if err := h.running(ctx); err != nil {
		h.deleteAll(0)
		h.waitGone(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("launch %s: %w", g.Trial, err)
	}
	go h.watch()
	return h, nil
}

// gangID names a launch: pods are named after it, rank by rank.
func (r *Runtime) gangID(trialID string) string {
	return fmt.Sprintf("rb-%s-%s", strings.ToLower(trialID), strconv.FormatInt(time.Now().UnixNano(), 36))
}

// fits says why the gang's nodes cannot take it now: a node unknown, not Ready, cordoned, being
// reclaimed, or with fewer GPUs free than its workers ask (what other pods on it hold counted).
func (r *Runtime) fits(ctx context.Context, g gang.Gang) (rank0Addr string, err error) {
	need := map[string]int{}
	var order []string
	for _, w := range g.Workers {
		if _, ok := need[w.Node.ID]; !ok {
			order = append(order, w.Node.ID)
		}
		need[w.Node.ID] += len(w.Env.GPUs)
	}
	for _, name := range order {
		n, err := r.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w: node %s does not exist", gang.ErrUnplaceable, name)
		}
		if err != nil {
			return "", fmt.Errorf("read node %s: %w", name, err)
		}
		if name == g.Workers[0].Node.ID {
			rank0Addr = internalIP(n)
		}
		// A node being reclaimed takes the gang: its watch stops it at once, as interrupted.
		if n.Spec.Unschedulable {
			return "", fmt.Errorf("%w: node %s is cordoned", gang.ErrUnplaceable, name)
		}
		if need[name] == 0 {
			continue
		}
		pods, err := r.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
		if err != nil {
			return "", fmt.Errorf("read the pods on node %s: %w", name, err)
		}
		free := n.Status.Allocatable[GPUResource]
		left := free.Value()
		for i := range pods.Items {
			if p := &pods.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				left -= podGPUs(p)
			}
		}
		if int64(need[name]) > left {
			return "", fmt.Errorf("%w: node %s has %d GPU(s) free of %d, and the gang's workers there need %d", gang.ErrUnplaceable, name, max(left, 0), free.Value(), need[name])
		}
	}
	return rank0Addr, nil
}

// internalIP is a node's address in the cluster: its InternalIP, else its first.
func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	if len(n.Status.Addresses) > 0 {
		return n.Status.Addresses[0].Address
	}
	return ""
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q, ok := c.Resources.Limits[GPUResource]
		if !ok {
			q = c.Resources.Requests[GPUResource]
		}
		n += q.Value()
	}
	return n
}

// Reclaim taints: a node carrying one is being taken away.
var reclaimTaints = []string{
	"karpenter.sh/disruption",                     // Karpenter: consolidation, drift, spot interruption
	"cloud.google.com/impending-node-termination", // GKE
	"aws-node-termination-handler/spot-itn",       // the AWS node termination handler
	"aws-node-termination-handler/asg-lifecycle-termination",
	"aws-node-termination-handler/rebalance-recommendation",
	"aws-node-termination-handler/scheduled-maintenance",
}

// gone says why a node is going or gone for its workers ("" when it is not): NotReady, a
// reclaim taint, or an unreachable/not-ready NoExecute taint.
func gone(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		for _, k := range reclaimTaints {
			if t.Key == k {
				return fmt.Sprintf("is being reclaimed (taint %s=%s:%s)", t.Key, t.Value, t.Effect)
			}
		}
		if t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) {
			return fmt.Sprintf("is %s (taint %s:NoExecute)", strings.TrimPrefix(t.Key, "node.kubernetes.io/"), t.Key)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("is not Ready (%s: %s)", c.Reason, c.Message)
		}
	}
	return ""
}

// pods are the gang's pods, rank by rank.
func (r *Runtime) pods(g gang.Gang, id, rank0Addr string, trainerKeys []string) ([]*corev1.Pod, error) {
	grace := r.grace()
	kill := int64((grace + SaveMargin).Seconds())
	port := r.port()
	no := false
	var out []*corev1.Pod
	for _, w := range g.Workers {
		env := w.Env
		env.MasterPort = port
		if env.MasterAddr == "" { // rank 0's node's: the pods share their nodes' network
			env.MasterAddr = rank0Addr
		}
		env.CheckpointDir = "" // the wrapper sets it to a folder of the pod
		// The device plugin gives a container its GPUs as devices 0..n-1.
		gpus := len(env.GPUs)
		env.GPUs = make([]int, gpus)
		for i := range env.GPUs {
			env.GPUs[i] = i
		}
		vars, err := env.Vars()
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", env.Rank, err)
		}
		trainer := append([]string(nil), g.Command...)
		self, image := r.Self, r.RunnerImage
		if g.Image != "" {
			self, image = ImageBinary, g.Image
		}
		if image == "" {
			image = "rubberband" // nodes that run commands on the host (the test's agent) ignore it
		}
		if trainer[0] == "rubberband" {
			trainer[0] = self // the built-in trainers run from the same binary
		}
		o := worker.Options{Trial: g.Trial, Rank: env.Rank, Gang: id, Grace: grace, Command: trainer, Code: r.Code}
		if r.RunID != "" {
			o.RunID, o.HeartbeatTimeout = r.RunID, cmp.Or(r.HeartbeatTimeout, heartbeat.DefaultTimeout)
		}
		if g.Timeout > 0 {
			o.Timeout = g.Timeout + 2*grace + time.Minute
		}
		var envs []corev1.EnvVar
		for _, kv := range append(append(append([]string(nil), r.StoreEnv...), r.ExtraEnv...), vars...) {
			k, v, _ := strings.Cut(kv, "=")
			envs = append(envs, corev1.EnvVar{Name: k, Value: v})
		}
		declared := make([]string, 0, len(g.Env))
		for k := range g.Env {
			declared = append(declared, k)
		}
		sort.Strings(declared)
		for _, k := range declared {
			envs = append(envs, corev1.EnvVar{Name: k, Value: g.Env[k]})
		}
		declared = append(declared, trainerKeys...) // envFrom gives them to the wrapper
		if len(declared) > 0 {                      // the wrapper passes these on to the trainer, and no other
			envs = append(envs, corev1.EnvVar{Name: trial.TrainerEnvVar, Value: strings.Join(declared, ",")})
		}
		var from []corev1.EnvFromSource
		if len(r.Secrets) > 0 {
			from = append(from, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(r.RunID)}}})
		}
		if r.TrainerSecret != "" {
			from = append(from, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: r.TrainerSecret}}})
		}
		res := corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(or(g.CPUMHz, 500)), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(or(g.MemoryMB, 512))<<20, resource.BinarySI)}}
		if gpus > 0 {
			q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
			res.Limits = corev1.ResourceList{GPUResource: q}
			res.Requests[GPUResource] = q
		}
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", id, env.Rank), Namespace: r.Namespace,
				Labels:      map[string]string{LabelRun: r.RunID, LabelTrial: strings.ToLower(g.Trial), LabelGang: id, LabelRank: strconv.Itoa(env.Rank)},
				Annotations: map[string]string{"rubberband.dev/experiment": r.Experiment, "rubberband.dev/trial": g.Trial}},
			Spec: corev1.PodSpec{
				NodeName: w.Node.ID, RestartPolicy: corev1.RestartPolicyNever, HostNetwork: true,
				ServiceAccountName: r.ServiceAccount, AutomountServiceAccountToken: &no,
				TerminationGracePeriodSeconds: &kill,
				// Bound by rubberband to a node it holds: whatever taints a pool's GPU nodes carry.
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				Containers: []corev1.Container{{Name: "trainer", Image: image, Command: escapeVars(append([]string{self, "worker"}, o.Args()...)),
					Env: envs, EnvFrom: from, Resources: res}},
			},
		})
	}
	return out, nil
}

// forbidden says whether err is the API server refusing a request for want of a permission (not
// a quota, which it also answers 403).
func forbidden(err error) bool {
	return apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "exceeded quota")
}

// forbidden makes a refusal by RBAC an infrastructure fault, which pauses the run (no try of the
// trial's: it would fail the same way), naming the namespace; other errors are returned as
// they are.
func (r *Runtime) forbidden(err error) error {
	if !forbidden(err) {
		return err
	}
	return &infra.Error{What: infra.Forbidden, Where: "namespace " + r.Namespace, Err: fmt.Errorf("%w (`rubberband kube-rbac` prints the Role the driver needs)", err)}
}

// escapeVars keeps the kubelet from expanding $(VAR) in a command (a shell script's $(...), its
// $$): every $ is written $$, which it turns back into $.
func escapeVars(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "$", "$$")
	}
	return out
}

// trainerKeys are the keys of TrainerSecret, which the wrapper passes on to the trainer (it
// passes on only what it is told of), read once.
func (r *Runtime) trainerKeys(ctx context.Context) ([]string, error) {
	if r.TrainerSecret == "" {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.trainer != nil {
		return r.trainer, nil
	}
	s, err := r.Client.CoreV1().Secrets(r.Namespace).Get(ctx, r.TrainerSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("trainer secret %s/%s: %w", r.Namespace, r.TrainerSecret, err)
	}
	keys := []string{}
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r.trainer = keys
	return keys, nil
}

// writeSecrets writes the run's Secret once, with the store's credentials.
func (r *Runtime) writeSecrets(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets || len(r.Secrets) == 0 {
		return nil
	}
	data := map[string][]byte{}
	for _, kv := range r.Secrets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("a secret that is not KEY=VALUE (its key: %q)", k)
		}
		data[k] = []byte(v)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(r.RunID), Namespace: r.Namespace, Labels: map[string]string{LabelRun: r.RunID}},
		Type: corev1.SecretTypeOpaque, Data: data}
	secrets := r.Client.CoreV1().Secrets(r.Namespace)
	_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // a resumed run's: its credentials may have changed
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write the run's Secret %s: %w", s.Name, err)
	}
	r.secrets = true
	return nil
}

// Close deletes the run's Secret: call it when the run has ended (or its driver stops).
func (r *Runtime) Close(ctx context.Context) error {
	if len(r.Secrets) == 0 {
		return nil
	}
	err := r.Client.CoreV1().Secrets(r.Namespace).Delete(ctx, SecretName(r.RunID), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the run's Secret %s: %w", SecretName(r.RunID), err)
	}
	r.mu.Lock()
	r.secrets = false
	r.mu.Unlock()
	return nil
}

// Reap deletes every pod of this run an earlier driver left, with their grace period (their
// wrappers save what they reached), and waits until they are gone.
func (r *Runtime) Reap(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: LabelRun + "=" + r.RunID}
	pods := r.Client.CoreV1().Pods(r.Namespace)
	list, err := pods.List(ctx, sel)
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	for _, p := range list.Items {
		r.logf("resume: deleting pod %s left by the previous driver", p.Name)
		if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reap %s: %w", p.Name, err)
		}
	}
	for {
		list, err := pods.List(ctx, sel)
		if err != nil {
			return fmt.Errorf("reap: %w", err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		// A pod whose node is gone has no kubelet left to end it: deleted at once, as the pod
		// garbage collector does (a resumed run once waited on one for ever).
		zero := int64(0)
		for _, p := range list.Items {
			if _, err := r.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("reap %s of deleted node %s: %w", p.Name, p.Spec.NodeName, err)
				}
			}
		}
		if err := r.clock().Sleep(ctx, r.poll()); err != nil {
			return fmt.Errorf("reap: %d pod(s) of the run still there: %w", len(list.Items), err)
		}
	}
}

// port picks a port for rank 0's rendezvous, distinct for every gang this runtime starts (pods
// share their node's network).
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

func (r *Runtime) grace() time.Duration { return cmp.Or(r.Grace, trial.GracePeriod) }

func (r *Runtime) clock() clock.Clock { return clock.Or(r.Clock) }

func (r *Runtime) poll() time.Duration { return cmp.Or(r.Poll, 200*time.Millisecond) }

func (r *Runtime) placeTimeout() time.Duration { return cmp.Or(r.PlaceTimeout, 2*time.Minute) }

func or(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
