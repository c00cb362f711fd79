package kubenode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/internal/syncio"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

var kube *servers.Kube

func TestMain(m *testing.M) { os.Exit(servers.KubeMain(m, &kube)) }

type fixture struct {
	t    *testing.T
	ctx  context.Context
	k    *servers.Kube
	ns   string
	a    *Agent
	dir  string
	log  *syncio.Buffer
	node string
}

// setup starts an agent of the test's own with one node, in a namespace of the test's own; the
// test fails if a pod process outlives Close.
func setup(t *testing.T, cfg Config) *fixture {
	t.Helper()
	k := servers.NeedKube(t, kube)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, k: k, ns: k.Namespace(t), dir: t.TempDir(), log: &syncio.Buffer{}}
	tlsCfg, err := k.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client, cfg.TLS, cfg.Dir, cfg.Log = k.Client, tlsCfg, f.dir, f.log
	if f.a, err = Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.a.Close()
		if n := f.a.Processes(); n != 0 {
			t.Errorf("%d pod processes left after Close", n)
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", f.log.String())
		}
	})
	f.node = f.addNode("n")
	return f
}

func (f *fixture) addNode(suffix string) string {
	f.t.Helper()
	name := f.ns + "-" + suffix
	n, err := f.a.AddNode(f.ctx, Node{Name: name, InstanceType: "p4d.24xlarge", CapacityType: "spot", GPUs: 8,
		Labels: map[string]string{"pool": "gpu"}, ProviderID: "aws:///us-east-1a/i-" + suffix})
	if err != nil {
		f.t.Fatal(err)
	}
	return n.Name
}

// pod creates a pod bound to node running script with /bin/sh in workDir.
func (f *fixture) pod(name, node, workDir, script string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			// The API requires an image; the agent runs the command on the host.
			Name: "main", Image: "busybox", Command: []string{"/bin/sh", "-c", script}, WorkingDir: workDir}}},
	}
	for _, m := range mutate {
		m(p)
	}
	created, err := f.k.Client.CoreV1().Pods(f.ns).Create(f.ctx, p, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return created
}

// until polls done every 50 ms until it says yes or the test's deadline (the error).
func (f *fixture) until(done func() bool) error {
	return clock.Until(f.ctx, clock.Wall{}, 50*time.Millisecond, done)
}

// waitPod polls the pod until ok or the test's deadline.
func (f *fixture) waitPod(name string, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	f.t.Helper()
	var p *corev1.Pod
	var err error
	if f.until(func() bool {
		p, err = f.k.Client.CoreV1().Pods(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		return err == nil && ok(p)
	}) != nil {
		f.t.Fatalf("pod %s: not %s: last %v %+v", name, what, err, podState(p))
	}
	return p
}

func podState(p *corev1.Pod) any {
	if p == nil {
		return nil
	}
	return p.Status
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == ph }
}

// waitFile polls for a file the pod's process writes.
func (f *fixture) waitFile(path string) []byte {
	f.t.Helper()
	var b []byte
	if f.until(func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	}) != nil {
		f.t.Fatalf("no %s", path)
	}
	return b
}

func terminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	if len(p.Status.ContainerStatuses) != 1 {
		return nil
	}
	return p.Status.ContainerStatuses[0].State.Terminated
}

// A pod runs as a process: Running with the kubelet's fields, then Succeeded on exit 0 or Failed
// with the exit code on exit 3; pods the agent cannot run fail with a reason.
func TestPodLifecycle(t *testing.T) {
	f := setup(t, Config{})
	work := filepath.Join(t.TempDir(), "made", "by", "agent") // created if missing
	f.pod("ok", f.node, "", "echo hello; exit 0")
	f.pod("three", f.node, work, "touch started; while [ ! -f go ]; do sleep 0.05; done; exit 3")

	ok := f.waitPod("ok", "Succeeded", phase(corev1.PodSucceeded))
	if term := terminated(ok); term == nil || term.ExitCode != 0 || term.Reason != "Completed" || term.FinishedAt.IsZero() {
		t.Errorf("ok: terminated %+v", term)
	}
	if ok.Status.PodIP != "127.0.0.1" || ok.Status.HostIP != "127.0.0.1" || ok.Status.StartTime == nil {
		t.Errorf("ok: status %+v", ok.Status)
	}

	f.waitFile(filepath.Join(work, "started"))
	running := f.waitPod("three", "Running", phase(corev1.PodRunning))
	cs := running.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || cs[0].State.Running.StartedAt.IsZero() || !cs[0].Ready {
		t.Errorf("three running: container statuses %+v", cs)
	}
	if !slices.ContainsFunc(running.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	}) {
		t.Errorf("three running: conditions %+v", running.Status.Conditions)
	}
	if f.a.Processes() != 1 {
		t.Errorf("Processes() = %d while one pod runs", f.a.Processes())
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	failed := f.waitPod("three", "Failed", phase(corev1.PodFailed))
	if term := terminated(failed); term == nil || term.ExitCode != 3 || term.Reason != "Error" || term.FinishedAt.IsZero() {
		t.Errorf("three: terminated %+v", term)
	}

	f.pod("image", f.node, "", "", func(p *corev1.Pod) { p.Spec.Containers[0].Command = nil })
	f.pod("two", f.node, "", "exit 0", func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "busybox", Command: []string{"/bin/true"}})
	})
	for name, reason := range map[string]string{"image": "ImageUnsupported", "two": "UnsupportedPod"} {
		p := f.waitPod(name, "Failed", phase(corev1.PodFailed))
		if p.Status.Reason != reason {
			t.Errorf("%s: reason %q, want %q", name, p.Status.Reason, reason)
		}
	}

	// Deleted while it starts, runs or ends, whichever the agent is at: it goes all the same.
	for _, name := range []string{"brief", "flawed"} {
		f.pod(name, f.node, "", "exit 0", func(p *corev1.Pod) {
			if name == "flawed" {
				p.Spec.Containers[0].Command = nil
			}
		})
		f.deletePod(name, 30)
	}
	f.gone("brief")
	f.gone("flawed")
}

// Env from a Secret, a ConfigMap and the pod's fields reaches the process, which inherits
// nothing else from the agent; the secret's value is in neither the pod, the agent's log nor any
// file the agent wrote.
func TestEnv(t *testing.T) {
	f := setup(t, Config{})
	const secretValue = "s3cret-Value-4f1d9"
	cli := f.k.Client.CoreV1()
	if _, err := cli.Secrets(f.ns).Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trainer"},
		Data: map[string][]byte{"token": []byte(secretValue)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ConfigMaps(f.ns).Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"LR": "0.1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	f.pod("env", f.node, work, "env > env.txt", func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.EnvFrom = []corev1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
		c.Env = []corev1.EnvVar{
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "trainer"}, Key: "token"}}},
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "GREETING", Value: "lr=$(CM_LR) $(UNDEFINED) $$(POD)"},
		}
	})
	done := f.waitPod("env", "Succeeded", phase(corev1.PodSucceeded))
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(f.waitFile(filepath.Join(work, "env.txt")))), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{"TOKEN": secretValue, "CM_LR": "0.1", "POD": "env", "NODE": f.node, "IP": "127.0.0.1",
		"GREETING": "lr=0.1 $(UNDEFINED) $(POD)", "PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	var names []string
	for k := range got {
		if _, ok := want[k]; !ok && k != "PWD" { // the shell's own
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if len(names) > 0 {
		t.Errorf("the process inherited %v", names)
	}

	spec, err := json.Marshal(done)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(spec, []byte(secretValue)) {
		t.Error("the secret's value is in the pod")
	}
	if strings.Contains(f.log.String(), secretValue) || !strings.Contains(f.log.String(), "env") {
		t.Errorf("agent log has the secret's value, or nothing:\n%s", f.log.String())
	}
	err = filepath.WalkDir(f.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(secretValue)) {
			t.Errorf("the agent wrote the secret's value to %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pods/log through the API server streams lines as the process prints them and ends when it
// ends; tailLines and limitBytes cut a finished log.
func TestLogs(t *testing.T) {
	f := setup(t, Config{})
	work := t.TempDir()
	f.pod("talk", f.node, work, `echo one; echo two >&2; while [ ! -f next ]; do sleep 0.05; done; echo three; while [ ! -f end ]; do sleep 0.05; done`)
	f.waitPod("talk", "Running", phase(corev1.PodRunning))
	logs := f.k.Client.CoreV1().Pods(f.ns)
	stream, err := logs.GetLogs("talk", &corev1.PodLogOptions{Follow: true}).Stream(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	lines := bufio.NewScanner(stream)
	next := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("log ended before %q: %v", want, lines.Err())
		}
		if lines.Text() != want {
			t.Fatalf("log line %q, want %q", lines.Text(), want)
		}
	}
	next("one")
	next("two")
	// "three" is printed only once the test has read the lines before it: they were streamed.
	if err := os.WriteFile(filepath.Join(work, "next"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	next("three")
	if err := os.WriteFile(filepath.Join(work, "end"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if lines.Scan() {
		t.Fatalf("log line %q after the last", lines.Text())
	}
	if err := lines.Err(); err != nil {
		t.Fatalf("follow did not end cleanly: %v", err)
	}
	f.waitPod("talk", "Succeeded", phase(corev1.PodSucceeded))

	for _, c := range []struct {
		opts corev1.PodLogOptions
		want string
	}{
		{corev1.PodLogOptions{}, "one\ntwo\nthree\n"},
		{corev1.PodLogOptions{TailLines: ptr(int64(2))}, "two\nthree\n"},
		{corev1.PodLogOptions{TailLines: ptr(int64(0))}, ""},
		{corev1.PodLogOptions{LimitBytes: ptr(int64(6))}, "one\ntw"},
		{corev1.PodLogOptions{Follow: true, TailLines: ptr(int64(1))}, "three\n"},
	} {
		b, err := logs.GetLogs("talk", &c.opts).DoRaw(f.ctx)
		if err != nil || string(b) != c.want {
			t.Errorf("logs %+v: %q, %v; want %q", c.opts, b, err, c.want)
		}
	}

	// A pod of the same name made anew has no log until it runs.
	f.deletePod("talk", 0)
	f.gone("talk")
	f.pod("talk", f.node, "", "exit 0", func(p *corev1.Pod) {
		p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}}}}
	})
	f.waitPod("talk", "waiting on its secret", func(p *corev1.Pod) bool { return len(p.Status.ContainerStatuses) == 1 })
	if b, err := logs.GetLogs("talk", &corev1.PodLogOptions{}).DoRaw(f.ctx); err == nil {
		t.Errorf("the new pod's log is the old one's: %q", b)
	}
}

// A log stops growing at its cap and says so.
func TestLogCap(t *testing.T) {
	f := setup(t, Config{maxLog: 1000})
	f.pod("loud", f.node, "", `i=0; while [ $i -lt 200 ]; do echo "line $i of a loud trainer"; i=$((i+1)); done`)
	f.waitPod("loud", "Succeeded", phase(corev1.PodSucceeded))
	b, err := f.k.Client.CoreV1().Pods(f.ns).GetLogs("loud", &corev1.PodLogOptions{}).DoRaw(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "line 0 of a loud trainer\n") || !strings.Contains(string(b), "this log reached 1000 bytes") || len(b) > 1200 {
		t.Errorf("capped log (%d bytes): %q", len(b), b)
	}
}

// watchPod returns the pod's states from now until it is deleted (or the test's deadline).
func (f *fixture) watchPod(name string) <-chan []corev1.Pod {
	f.t.Helper()
	w, err := f.k.Client.CoreV1().Pods(f.ns).Watch(f.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		f.t.Fatal(err)
	}
	out := make(chan []corev1.Pod, 1)
	go func() {
		defer w.Stop()
		var seen []corev1.Pod
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				seen = append(seen, *p)
			}
			if ev.Type == watch.Deleted {
				break
			}
		}
		out <- seen
	}()
	return out
}

// lastTerminated is the last terminated container state among the pod's states, and whether the
// pod was deleted (the watch saw it go).
func lastTerminated(states []corev1.Pod) (*corev1.ContainerStateTerminated, corev1.PodPhase) {
	for i := len(states) - 1; i >= 0; i-- {
		if term := terminated(&states[i]); term != nil {
			return term, states[i].Status.Phase
		}
	}
	return nil, ""
}

func (f *fixture) deletePod(name string, grace int64) {
	f.t.Helper()
	if err := f.k.Client.CoreV1().Pods(f.ns).Delete(f.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) gone(name string) {
	f.t.Helper()
	var err error
	if f.until(func() bool {
		_, err = f.k.Client.CoreV1().Pods(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}) != nil {
		f.t.Fatalf("pod %s still there: %v", name, err)
	}
}

// Deleting a pod SIGTERMs its process, which may exit on its own (reported Succeeded) or is
// SIGKILLed after the grace period (exit 137); then the pod is deleted for good. A pod that never
// started is deleted at once, whatever its grace period.
func TestGracefulDeletion(t *testing.T) {
	f := setup(t, Config{})
	polite, stubborn := t.TempDir(), t.TempDir()
	f.pod("polite", f.node, polite, `trap 'echo bye > marker; exit 0' TERM; touch ready; while :; do sleep 0.05; done`)
	f.pod("stubborn", f.node, stubborn, `trap '' TERM; touch ready; while :; do sleep 0.05; done`)
	f.pod("pending", f.node, "", "exit 0", func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k"}}}}
	})
	f.waitFile(filepath.Join(polite, "ready"))
	f.waitFile(filepath.Join(stubborn, "ready"))
	f.waitPod("pending", "waiting on its secret", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})

	politeStates, stubbornStates, pendingStates := f.watchPod("polite"), f.watchPod("stubborn"), f.watchPod("pending")
	f.deletePod("polite", 5)
	f.deletePod("stubborn", 2)
	f.deletePod("pending", 3600) // the test's deadline is far shorter
	f.gone("polite")
	f.gone("stubborn")
	f.gone("pending")

	if b, err := os.ReadFile(filepath.Join(polite, "marker")); err != nil || string(b) != "bye\n" {
		t.Errorf("polite: marker %q, %v: its TERM trap did not run", b, err)
	}
	if term, ph := lastTerminated(<-politeStates); term == nil || term.ExitCode != 0 || ph != corev1.PodSucceeded {
		t.Errorf("polite: last reported %+v %s, want exit 0 Succeeded", term, ph)
	}
	if term, ph := lastTerminated(<-stubbornStates); term == nil || term.ExitCode != 128+int32(syscall.SIGKILL) || ph != corev1.PodFailed {
		t.Errorf("stubborn: last reported %+v %s, want SIGKILL (137) Failed", term, ph)
	}
	if term, _ := lastTerminated(<-pendingStates); term != nil {
		t.Errorf("pending: reported terminated %+v though it never ran", term)
	}
	if n := f.a.Processes(); n != 0 {
		t.Errorf("Processes() = %d after every pod was deleted", n)
	}
}

// pidOf is the pid the pod's script wrote to its working dir.
func (f *fixture) pidOf(work string) int {
	f.t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(string(f.waitFile(filepath.Join(work, "pid")))))
	if err != nil {
		f.t.Fatal(err)
	}
	return pid
}

// dead polls until the process is gone (it may stay a zombie until the agent reaps it).
func (f *fixture) dead(pid int) {
	f.t.Helper()
	if f.until(func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		parts := strings.Fields(string(stat))
		return errors.Is(err, os.ErrNotExist) || (len(parts) > 2 && parts[2] == "Z")
	}) != nil {
		f.t.Fatalf("process %d still running", pid)
	}
}

// A machine that vanishes (RemoveNode) or whose Node object someone deletes takes its pods'
// processes with it; the other node's pod runs on until Close kills it.
func TestNodesGo(t *testing.T) {
	f := setup(t, Config{})
	other, third := f.addNode("other"), f.addNode("third")
	works := map[string]string{}
	for _, node := range []string{f.node, other, third} {
		works[node] = t.TempDir()
		f.pod("on-"+strings.TrimPrefix(node, f.ns+"-"), node, works[node] /* $$ is Kubernetes' escape of $ */, `echo $$$$ > pid; while :; do sleep 0.05; done`)
	}
	pids := map[string]int{}
	for node, work := range works {
		pids[node] = f.pidOf(work)
	}
	for _, name := range []string{"on-n", "on-other", "on-third"} {
		f.waitPod(name, "Running", phase(corev1.PodRunning))
	}
	if n := f.a.Processes(); n != 3 {
		t.Fatalf("Processes() = %d, want 3", n)
	}
	nodes := f.k.Client.CoreV1().Nodes()
	n, err := nodes.Get(f.ctx, f.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.Capacity.Name("nvidia.com/gpu", "").Value() != 8 || n.Labels["karpenter.sh/capacity-type"] != "spot" ||
		n.Labels["node.kubernetes.io/instance-type"] != "p4d.24xlarge" || n.Labels["pool"] != "gpu" ||
		n.Status.DaemonEndpoints.KubeletEndpoint.Port != int32(f.a.Port()) || len(n.Spec.Taints) != 0 {
		// No taint: the admission's not-ready one is lifted, as the node is Ready.
		t.Errorf("node: labels %v capacity %v endpoints %+v taints %v", n.Labels, n.Status.Capacity, n.Status.DaemonEndpoints, n.Spec.Taints)
	}

	if err := f.a.RemoveNode(f.ctx, f.node); err != nil {
		t.Fatal(err)
	}
	f.dead(pids[f.node])
	if _, err := nodes.Get(f.ctx, f.node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s after RemoveNode: %v", f.node, err)
	}
	if err := nodes.Delete(f.ctx, other, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.dead(pids[other])
	if f.until(func() bool { return f.a.Processes() == 1 }) != nil {
		t.Fatalf("Processes() = %d, want the third node's 1", f.a.Processes())
	}
	if err := syscall.Kill(pids[third], 0); err != nil {
		t.Errorf("the third node's pod died with the others: %v", err)
	}

	if err := f.a.SetReady(f.ctx, third, false); err != nil {
		t.Fatal(err)
	}
	reclaim := corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}
	if err := f.a.Taint(f.ctx, third, reclaim); err != nil {
		t.Fatal(err)
	}
	n, err = nodes.Get(f.ctx, third, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse
	}) || !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == reclaim.Key }) ||
		!slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
		t.Errorf("node %s: conditions %+v taints %+v", third, n.Status.Conditions, n.Spec.Taints)
	}
	if err := f.a.SetReady(f.ctx, third, true); err != nil {
		t.Fatal(err)
	}
	if n, err = nodes.Get(f.ctx, third, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != reclaim.Key {
		t.Errorf("node %s ready again: taints %+v, want the reclaim notice alone", third, n.Spec.Taints)
	}

	f.a.Close()
	if n := f.a.Processes(); n != 0 {
		t.Errorf("Processes() = %d after Close", n)
	}
	f.dead(pids[third])
}
