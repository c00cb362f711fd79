package kubenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// podRun is one pod's life cycle on the agent: resolve, start, report, stop.
type podRun struct {
	a    *Agent
	pod  *corev1.Pod // as first seen
	uid  types.UID
	node string

	termOnce, killOnce sync.Once
	terminating        chan struct{} // closed on graceful deletion
	killed             chan struct{} // closed when the process must die now, unreported
	grace              time.Duration // set before terminating closes
	finished           chan struct{} // closed when run returns (the process reaped)
}

func newPodRun(a *Agent, p *corev1.Pod) *podRun {
	return &podRun{a: a, pod: p.DeepCopy(), uid: p.UID, node: p.Spec.NodeName,
		terminating: make(chan struct{}), killed: make(chan struct{}), finished: make(chan struct{})}
}

// terminate starts graceful deletion with the pod's grace period (nil: 30 s, the API default).
func (r *podRun) terminate(seconds *int64) {
	r.termOnce.Do(func() {
		r.grace = 30 * time.Second
		if seconds != nil {
			r.grace = time.Duration(*seconds) * time.Second
		}
		close(r.terminating)
	})
}

// kill ends the process at once; nothing more is reported (the machine or the pod is gone).
func (r *podRun) kill() { r.killOnce.Do(func() { close(r.killed) }) }

func (r *podRun) name() string { return r.pod.Namespace + "/" + r.pod.Name }

func (r *podRun) run() {
	a := r.a
	defer a.wg.Done()
	defer func() {
		// Under the lock that syncPod signals under: a deletion that came after the last look at
		// r.terminating is seen here, or by syncPod once the run is done.
		a.mu.Lock()
		del := closed(r.terminating) && !closed(r.killed)
		delete(a.runs, r.uid)
		a.done[r.uid] = del
		a.mu.Unlock()
		if del {
			a.deletePod(r.pod)
		}
		close(r.finished)
	}()
	// Reports outlive Close's cancel only as long as a status update takes.
	ctx := context.Background()
	spec := r.pod.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) > 0 {
		r.fail(ctx, "UnsupportedPod", fmt.Sprintf("kubenode runs pods of exactly one container and no init containers; this one has %d and %d",
			len(spec.Containers), len(spec.InitContainers)))
		return
	}
	c := spec.Containers[0]
	if len(c.Command) == 0 {
		r.fail(ctx, "ImageUnsupported", fmt.Sprintf("kubenode has no container runtime: container %q needs a command to run on the host (image %q)", c.Name, c.Image))
		return
	}
	env, ok := r.resolveEnv(ctx, c)
	if !ok {
		return
	}
	if closed(r.terminating) || closed(r.killed) {
		return
	}
	p, err := r.start(c, env)
	if err != nil {
		a.logf("pod %s: start: %v", r.name(), err)
		r.report(ctx, func(s *corev1.PodStatus) {
			now := metav1.Now()
			s.Phase = corev1.PodFailed
			s.ContainerStatuses = []corev1.ContainerStatus{containerStatus(c, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: now, FinishedAt: now}})}
		})
		return
	}
	startedAt := metav1.Now()
	r.report(ctx, func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.HostIP, s.PodIP = "127.0.0.1", "127.0.0.1"
		s.HostIPs, s.PodIPs = []corev1.HostIP{{IP: "127.0.0.1"}}, []corev1.PodIP{{IP: "127.0.0.1"}}
		s.StartTime = &startedAt
		s.Conditions = podConditions(s.Conditions, true, startedAt)
		cs := containerStatus(c, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt}})
		cs.Ready, cs.Started = true, ptr(true)
		cs.ContainerID = "kubenode://" + strconv.Itoa(p.cmd.Process.Pid)
		s.ContainerStatuses = []corev1.ContainerStatus{cs}
	})
	a.logf("pod %s running on %s (pid %d)", r.name(), r.node, p.cmd.Process.Pid)

	r.wait(p)
	if closed(r.killed) {
		a.logf("pod %s killed", r.name())
		return
	}
	code, reason := p.exitCode(), "Completed"
	phase := corev1.PodSucceeded
	if code != 0 {
		phase, reason = corev1.PodFailed, "Error"
	}
	finishedAt := metav1.Now()
	r.report(ctx, func(s *corev1.PodStatus) {
		s.Phase = phase
		s.Conditions = podConditions(s.Conditions, false, finishedAt)
		cs := containerStatus(c, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(code), Reason: reason, StartedAt: startedAt, FinishedAt: finishedAt,
			ContainerID: "kubenode://" + strconv.Itoa(p.cmd.Process.Pid)}})
		cs.Started = ptr(false)
		cs.ContainerID = "kubenode://" + strconv.Itoa(p.cmd.Process.Pid)
		s.ContainerStatuses = []corev1.ContainerStatus{cs}
	})
	a.logf("pod %s exited %d", r.name(), code)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit: on graceful deletion it sends SIGTERM, then SIGKILL after
// the grace period; on kill (or Close) SIGKILL at once.
func (r *podRun) wait(p *process) {
	defer p.reap()
	var deadline <-chan time.Time
	term := r.terminating
	for {
		select {
		case <-p.exited:
			return
		case <-term:
			term = nil
			r.a.logf("pod %s: SIGTERM, grace %v", r.name(), r.grace)
			p.signal(syscall.SIGTERM)
			t := time.NewTimer(r.grace)
			defer t.Stop()
			deadline = t.C
		case <-deadline:
			r.a.logf("pod %s: grace period over: SIGKILL", r.name())
			p.signal(syscall.SIGKILL)
			deadline = nil
		case <-r.killed:
			p.signal(syscall.SIGKILL)
			<-p.exited
			return
		}
	}
}

// fail reports the pod Failed before its container ran.
func (r *podRun) fail(ctx context.Context, reason, msg string) {
	r.a.logf("pod %s: %s: %s", r.name(), reason, msg)
	c := r.pod.Spec.Containers
	r.report(ctx, func(s *corev1.PodStatus) {
		now := metav1.Now()
		s.Phase, s.Reason, s.Message = corev1.PodFailed, reason, msg
		s.ContainerStatuses = nil
		for _, c := range c {
			s.ContainerStatuses = append(s.ContainerStatuses, containerStatus(c, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 128, Reason: reason, Message: msg, StartedAt: now, FinishedAt: now}}))
		}
	})
}

// waiting reports the container waiting (a kubelet's CreateContainerConfigError), once per reason.
func (r *podRun) waiting(ctx context.Context, c corev1.Container, reason, msg string) {
	r.report(ctx, func(s *corev1.PodStatus) {
		s.ContainerStatuses = []corev1.ContainerStatus{containerStatus(c, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}})}
	})
}

// report changes the pod's status through the status subresource, as a kubelet does. A pod gone
// from the API is nothing to report on.
func (r *podRun) report(ctx context.Context, change func(*corev1.PodStatus)) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pods := r.a.client.CoreV1().Pods(r.pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		p, err := pods.Get(ctx, r.pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != r.uid {
			return apierrors.NewNotFound(corev1.Resource("pods"), r.pod.Name)
		}
		change(&p.Status)
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		r.a.logf("pod %s: status: %v", r.name(), err)
	}
}

func containerStatus(c corev1.Container, state corev1.ContainerState) corev1.ContainerStatus {
	image := c.Image
	if image == "" {
		image = "kubenode/host"
	}
	return corev1.ContainerStatus{Name: c.Name, Image: image, ImageID: image, State: state, Started: ptr(state.Running != nil)}
}

// podConditions sets the conditions a kubelet reports for a running (ready) or finished pod.
func podConditions(old []corev1.PodCondition, ready bool, now metav1.Time) []corev1.PodCondition {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	set := map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodReadyToStartContainers: corev1.ConditionTrue, corev1.PodInitialized: corev1.ConditionTrue,
		corev1.ContainersReady: status, corev1.PodReady: status,
	}
	if !ready {
		set[corev1.PodReadyToStartContainers] = corev1.ConditionFalse
	}
	var out []corev1.PodCondition
	for _, c := range old {
		if s, ok := set[c.Type]; ok {
			if c.Status != s {
				c.Status, c.LastTransitionTime = s, now
			}
			delete(set, c.Type)
		}
		out = append(out, c)
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if s, ok := set[t]; ok {
			out = append(out, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now})
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// process is a pod's container running on the host.
type process struct {
	cmd    *exec.Cmd
	log    *logFile
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's
}

// start runs the container's command in its own process group, its output to the pod's log file.
func (r *podRun) start(c corev1.Container, env []string) (*process, error) {
	a := r.a
	base := fmt.Sprintf("%s_%s_%s", r.pod.Namespace, r.pod.Name, r.uid)
	dir := c.WorkingDir
	if dir == "" {
		dir = filepath.Join(a.cfg.Dir, "pods", base)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("working dir: %w", err)
	}
	lf, err := newLogFile(filepath.Join(a.cfg.Dir, "logs", base, c.Name+".log"), c.Name, r.uid, a.cfg.maxLog)
	if err != nil {
		return nil, err
	}
	lookup := envLookup(env)
	argv := append(append([]string{}, c.Command...), c.Args...)
	for i := range argv {
		argv[i] = expand(argv[i], lookup)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	// Its own group, so that signals reach whatever it started; and it dies with the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr, pw, err := os.Pipe()
	if err != nil {
		lf.finish()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	a.mu.Lock()
	if err := cmd.Start(); err != nil {
		a.mu.Unlock()
		pr.Close()
		pw.Close()
		lf.finish()
		return nil, err
	}
	a.procs++
	a.logs[r.name()] = lf
	a.mu.Unlock()
	pw.Close()
	p := &process{cmd: cmd, log: lf, exited: make(chan struct{})}
	go lf.copyFrom(pr)
	go func() {
		p.err = cmd.Wait()
		a.mu.Lock()
		a.procs--
		a.mu.Unlock()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) signal(sig syscall.Signal) { syscall.Kill(-p.cmd.Process.Pid, sig) }

// reap kills what the process left in its group (a container's processes end with it) and waits
// for its output to be written.
func (p *process) reap() {
	<-p.exited
	p.signal(syscall.SIGKILL)
	p.log.waitCopied(5 * time.Second)
}

// exitCode is the container's exit code as a kubelet reports it: 128+signal when killed.
func (p *process) exitCode() int {
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		if p.err != nil {
			return 128
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
