package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/gang/gangtest"
	"github.com/rubberband-hpo/rubberband/executor/kube/admit"
	"github.com/rubberband-hpo/rubberband/internal/syncio"
	"github.com/rubberband-hpo/rubberband/internal/testkit/kubenode"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/trial"
)

// kcluster is an agent shared by the tests below; each makes its namespace and nodes (env).
type kcluster struct {
	k     *servers.Kube
	agent *kubenode.Agent
	self  string
	log   *syncio.Buffer
}

func startKCluster(t *testing.T) *kcluster {
	k := servers.NeedKube(t, kubeCP)
	tlsCfg, err := k.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	c := &kcluster{k: k, log: &syncio.Buffer{}}
	if c.agent, err = kubenode.Start(context.Background(), kubenode.Config{Client: k.Client, TLS: tlsCfg, Dir: t.TempDir(), Log: c.log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.agent.Close()
		if n := c.agent.Processes(); n != 0 {
			t.Errorf("%d pod processes left", n)
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", c.log.String())
		}
	})
	if c.self, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	return c
}

// env is a namespace of the test's own with two nodes of two GPUs, and a Runtime on it with its
// own checkpoint store and log directory.
type env struct {
	ns    string
	nodes []cloud.Node
	r     *Runtime
	store *file.Store
}

func (c *kcluster) env(t *testing.T) env {
	ns := c.k.Namespace(t)
	var nodes []cloud.Node
	for _, suffix := range []string{"a", "b"} {
		name := ns + "-" + suffix
		if _, err := c.agent.AddNode(t.Context(), kubenode.Node{Name: name, InstanceType: "g5.12xlarge", CapacityType: "spot", GPUs: 2}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, cloud.Node{ID: name, GPUs: 2, Addr: "127.0.0.1"})
	}
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "checkpoints")
	store, err := file.New(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runtime{Client: c.k.Client, Namespace: ns, Self: c.self, StoreEnv: []string{"RB_CHECKPOINTS=file://" + storeDir},
		LogDir: filepath.Join(dir, "logs"), Grace: time.Second, PlaceTimeout: 30 * time.Second} // Store: opened from StoreEnv
	t.Cleanup(func() {
		ctx := context.Background()
		if pods, err := c.k.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
			t.Errorf("pods left behind (%v): %d", err, len(pods.Items))
		}
		for _, n := range nodes {
			c.agent.RemoveNode(ctx, n.ID)
		}
	})
	return env{ns: ns, nodes: nodes, r: r, store: store}
}

// disrupt taints a node as Karpenter does before it takes it away.
func (c *kcluster) disrupt(t *testing.T, node string) {
	if err := c.agent.Taint(context.Background(), node, corev1.Taint{Key: "karpenter.sh/disruption", Value: "disrupted", Effect: corev1.TaintEffectNoSchedule}); err != nil {
		t.Error(err)
	}
}

func TestKubeRuntime(t *testing.T) {
	c := startKCluster(t)
	t.Run("SecretsStayOutOfPods", func(t *testing.T) { secretsStayOutOfPods(t, c) })
	t.Run("NodeReclaimedMidGang", func(t *testing.T) { nodeReclaimedMidGang(t, c) })
	t.Run("ReapLeavesNoPod", func(t *testing.T) { reapLeavesNoPod(t, c) })
	t.Run("CordonedIsUnplaceable", func(t *testing.T) { cordonedIsUnplaceable(t, c) })
	t.Run("CreateFailureLeavesNoPod", func(t *testing.T) { createFailureLeavesNoPod(t, c) })
	t.Run("DriversRoleIsEnough", func(t *testing.T) { driversRoleIsEnough(t, c) })
}

// waitFile polls for a file the gang's scripts touch, up to a minute.
func waitFile(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if (clock.Wall{}).Sleep(ctx, 50*time.Millisecond) != nil {
			t.Fatalf("%s never appeared", path)
		}
	}
}

func gangOf(trialID string, nodes []cloud.Node, n, start, target int, script string) gang.Gang {
	g := gang.Gang{Trial: trialID, Command: []string{"/bin/sh", "-c", script}}
	for rank := range n {
		g.Workers = append(g.Workers, gang.Worker{Node: nodes[rank%len(nodes)], Env: trial.Env{TrialID: trialID, Experiment: "kube",
			StartIter: start, TargetIter: target, Rank: rank, WorldSize: n, MasterAddr: nodes[0].Addr, GPUs: []int{rank / len(nodes)}}})
	}
	return g
}

// The store's credentials reach the wrapper through the run's Secret, never a pod spec; the
// trainer's Secret reaches the trainer; every pod has its rank, the world size and rank 0's
// node's address (looked up when the gang names none); Close deletes the run's Secret.
func secretsStayOutOfPods(t *testing.T, c *kcluster) {
	e := c.env(t)
	const secret, trainerSecret = "s3cr3t-Key/value+1", "tr41ner-t0ken"
	e.r.RunID = "r20260101-000000-5ec7e75a"
	e.r.Secrets = []string{"AWS_SECRET_ACCESS_KEY=" + secret}
	if _, err := c.k.Client.CoreV1().Secrets(e.ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "user"},
		StringData: map[string]string{"TRAINER_TOKEN": trainerSecret}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.r.TrainerSecret = "user"
	dir := t.TempDir()
	script := `M='` + dir + `'
echo "$RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT $TRAINER_TOKEN ${AWS_SECRET_ACCESS_KEY:-none}" > "$M/env-$RANK"
while [ ! -e "$M/go" ]; do sleep 0.05; done
if [ "$RANK" = 0 ]; then echo '@rb {"iter": 1}'; fi`
	g := gangOf("t-secret", e.nodes, 2, 0, 1, script)
	for i := range g.Workers { // no address given: rank 0's node's InternalIP (the agent's 127.0.0.1)
		g.Workers[i].Env.MasterAddr = ""
	}
	h, err := e.r.Launch(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	waitFile(t, filepath.Join(dir, "env-0"))
	waitFile(t, filepath.Join(dir, "env-1"))
	pods, err := c.k.Client.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods: %v, %v", pods, err)
	}
	b, _ := json.Marshal(pods)
	if strings.Contains(string(b), secret) || strings.Contains(string(b), trainerSecret) {
		t.Fatalf("a pod spec holds a secret:\n%s", b)
	}
	for _, p := range pods.Items {
		c := p.Spec.Containers[0]
		if len(c.EnvFrom) != 2 || c.EnvFrom[0].SecretRef.Name != SecretName(e.r.RunID) || c.EnvFrom[1].SecretRef.Name != "user" {
			t.Errorf("pod %s takes its secrets from %+v", p.Name, c.EnvFrom)
		}
		gpus := c.Resources.Limits[GPUResource]
		if !p.Spec.HostNetwork || p.Spec.RestartPolicy != corev1.RestartPolicyNever || gpus.Value() != 1 ||
			p.Labels[LabelRun] != e.r.RunID || p.Labels[LabelTrial] != "t-secret" || p.Labels[LabelGang] == "" {
			t.Errorf("pod %s: host network %v, restart %s, GPUs %v, labels %v", p.Name, p.Spec.HostNetwork, p.Spec.RestartPolicy, gpus.Value(), p.Labels)
		}
	}
	s, err := c.k.Client.CoreV1().Secrets(e.ns).Get(t.Context(), SecretName(e.r.RunID), metav1.GetOptions{})
	if err != nil || string(s.Data["AWS_SECRET_ACCESS_KEY"]) != secret || s.Labels[LabelRun] != e.r.RunID {
		t.Fatalf("the run's Secret: %v, %v", s, err)
	}
	var port string
	for rank := range 2 {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("env-%d", rank)))
		f := strings.Fields(string(b))
		// The store's credential is the wrapper's, not the trainer's; the user's reaches the trainer.
		if len(f) != 6 || f[0] != fmt.Sprint(rank) || f[1] != "2" || f[2] != "127.0.0.1" || f[4] != trainerSecret || f[5] != "none" {
			t.Errorf("rank %d's environment: %q", rank, b)
		}
		if len(f) > 3 && port != "" && f[3] != port {
			t.Errorf("rank %d's MASTER_PORT %s, rank 0's %s", rank, f[3], port)
		}
		if len(f) > 3 {
			port = f[3]
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	var reps []trial.Report
	for r := range h.Reports() {
		reps = append(reps, r)
	}
	if err := h.Wait(); err != nil || len(reps) != 1 {
		t.Fatalf("wait: %v, reports %+v", err, reps)
	}
	if log, _ := os.ReadFile(filepath.Join(e.r.LogDir, "t-secret.log")); strings.Contains(string(log), secret) {
		t.Errorf("the trial's log holds a secret:\n%s", log)
	}
	if err := e.r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.k.Client.CoreV1().Secrets(e.ns).Get(t.Context(), SecretName(e.r.RunID), metav1.GetOptions{}); err == nil {
		t.Fatal("the run's Secret is left after Close")
	}
}

// A node taken away under a gang (deleted: the machine gone; NotReady; tainted by Karpenter)
// stops the rest of it as Stop does: Wait names the node and why, rank 0 (elsewhere) saves what
// it reached, and no pod is left.
func nodeReclaimedMidGang(t *testing.T, c *kcluster) {
	for _, k := range []struct {
		name, reason string
		reclaim      func(ctx context.Context, node string) error
	}{
		{"deleted", "node deleted", c.agent.RemoveNode},
		{"NotReady", "NotReady", func(ctx context.Context, node string) error { return c.agent.SetReady(ctx, node, false) }},
		{"disrupted", "karpenter.sh/disruption=disrupted", func(ctx context.Context, node string) error {
			return c.agent.Taint(ctx, node, corev1.Taint{Key: "karpenter.sh/disruption", Value: "disrupted", Effect: corev1.TaintEffectNoSchedule})
		}},
	} {
		t.Run(k.name, func(t *testing.T) {
			e := c.env(t)
			h, err := e.r.Launch(t.Context(), gangOf("t-gone", e.nodes, 2, 0, 1000, gangtest.CounterScript))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Stop)
			if _, ok := <-h.Reports(); !ok {
				t.Fatalf("no report: %v", h.Wait())
			}
			if err := k.reclaim(t.Context(), e.nodes[1].ID); err != nil {
				t.Fatal(err)
			}
			last := 0
			for r := range h.Reports() {
				last = r.Iter
			}
			var in *gang.InterruptedError
			if err := h.Wait(); !errors.As(err, &in) || in.Node != e.nodes[1].ID || !strings.Contains(in.Reason, k.reason) {
				t.Fatalf("wait: %v, want the interruption of %s (%s)", err, e.nodes[1].ID, k.reason)
			}
			if list, _ := e.store.List(t.Context(), "trials/t-gone/"); len(list) != 1 {
				t.Fatalf("checkpoints after the interruption: %v", list)
			}
			if last >= 1000 {
				t.Fatalf("trained to %d", last)
			}
		})
	}
}

// Reap deletes every pod of the run, and only the run's, and returns once they are gone.
func reapLeavesNoPod(t *testing.T, c *kcluster) {
	e := c.env(t)
	e.r.RunID = "r1"
	h, err := e.r.Launch(t.Context(), gangOf("t-reap", e.nodes, 2, 0, 1, `sleep 60 & wait`))
	if err != nil {
		t.Fatal(err)
	}
	other := &Runtime{Client: c.k.Client, Namespace: e.ns, RunID: "r2", Self: c.self, StoreEnv: e.r.StoreEnv, Grace: time.Second}
	ho, err := other.Launch(t.Context(), gangOf("t-other", e.nodes[1:], 1, 0, 1, `sleep 60 & wait`))
	if err != nil {
		t.Fatal(err)
	}
	resumed := &Runtime{Client: c.k.Client, Namespace: e.ns, RunID: "r1", Grace: time.Second}
	if err := resumed.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	pods, _ := c.k.Client.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: LabelRun + "=r1"})
	if len(pods.Items) != 0 {
		t.Fatalf("%d pods of the run after Reap", len(pods.Items))
	}
	if err := h.Wait(); err == nil {
		t.Fatal("a reaped gang ended well")
	}
	if pods, _ := c.k.Client.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: LabelRun + "=r2"}); len(pods.Items) != 1 {
		t.Fatalf("another run's pods after Reap: %d", len(pods.Items))
	}
	ho.Stop()
	ho.Wait()
}

// A gang with a worker on a cordoned node is refused at once, no pod created.
func cordonedIsUnplaceable(t *testing.T, c *kcluster) {
	e := c.env(t)
	n, err := c.k.Client.CoreV1().Nodes().Get(t.Context(), e.nodes[1].ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = true
	if _, err := c.k.Client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.r.PlaceTimeout = time.Minute // refused by the check, not the timeout
	start := time.Now()
	_, err = e.r.Launch(t.Context(), gangOf("t-cordon", e.nodes, 2, 0, 1, `true`))
	if !errors.Is(err, gang.ErrUnplaceable) || !strings.Contains(err.Error(), "cordoned") || !strings.Contains(err.Error(), e.nodes[1].ID) {
		t.Fatalf("launch: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("refused after %v", took)
	}
	if pods, _ := c.k.Client.CoreV1().Pods(e.ns).List(t.Context(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("%d pods created for a refused gang", len(pods.Items))
	}
}

// The runtime works with no more than the driver's Role (admit.Rules), through a kubeconfig that
// Config loads: a gang runs, fails, is reaped, and the run's Secret is deleted.
func driversRoleIsEnough(t *testing.T, c *kcluster) {
	e := c.env(t)
	ctx := t.Context()
	for _, obj := range admit.Objects(admit.Access{Namespace: e.ns, ServiceAccount: "default", Nodes: "pool"}) {
		var err error
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, err = c.k.Client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.k.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.k.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() {
				c.k.Client.RbacV1().ClusterRoles().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.k.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() {
				c.k.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	token, err := c.k.Token(ctx, e.ns, "default")
	if err != nil {
		t.Fatal(err)
	}
	path, err := c.k.Kubeconfig(t.TempDir(), c.k.As(token), e.ns)
	if err != nil {
		t.Fatal(err)
	}
	cfg, ns, err := Config(path, "")
	if err != nil || ns != e.ns {
		t.Fatalf("config: namespace %q, %v", ns, err)
	}
	if _, _, err := Config(filepath.Join(t.TempDir(), "none"), ""); err == nil || !strings.Contains(err.Error(), "none") {
		t.Fatalf("a kubeconfig that is not there: %v, want an error naming it", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.r.Client, e.r.RunID, e.r.Secrets = client, "r-rbac", []string{"AWS_SECRET_ACCESS_KEY=x"}
	reps, err := drain(e.r, t, gangOf("t-rbac", e.nodes, 2, 0, 2, gangtest.CounterScript))
	if err != nil || len(reps) != 2 {
		t.Fatalf("a gang as the driver: %v, reports %+v", err, reps)
	}
	if _, err := drain(e.r, t, gangOf("t-rbac-fail", e.nodes, 2, 0, 2, `[ "$RANK" = 1 ] && exit 3; sleep 60 & wait`)); err == nil ||
		!strings.Contains(err.Error(), "exited 3") || !strings.Contains(err.Error(), e.nodes[1].ID) {
		t.Fatalf("a failing gang as the driver: %v, want rank 1's exit code and node", err)
	}
	h, err := e.r.Launch(ctx, gangOf("t-rbac-reap", e.nodes, 1, 0, 2, `sleep 60 & wait`))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.r.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	if err := e.r.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// drain launches g and reads it to the end.
func drain(r *Runtime, t *testing.T, g gang.Gang) ([]trial.Report, error) {
	h, err := r.Launch(t.Context(), g)
	if err != nil {
		return nil, err
	}
	t.Cleanup(h.Stop)
	var reps []trial.Report
	for rep := range h.Reports() {
		reps = append(reps, rep)
	}
	return reps, h.Wait()
}

// A gang whose second pod the API server refuses (the namespace's quota allows one) is not
// launched, and its first pod is deleted: all or nothing.
func createFailureLeavesNoPod(t *testing.T, c *kcluster) {
	e := c.env(t)
	ctx := t.Context()
	quotas := c.k.Client.CoreV1().ResourceQuotas(e.ns)
	q, err := quotas.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "one-pod"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the quota controller (not running here) would say: nothing used yet.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if _, err := quotas.UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = e.r.Launch(ctx, gangOf("t-quota", e.nodes, 2, 0, 1, `touch '`+dir+`'/ran-$RANK; sleep 60`))
	if err == nil || !strings.Contains(err.Error(), "-1 on node") || !strings.Contains(err.Error(), "exceeded quota") { // the second pod refused
		t.Fatalf("launch past the quota: %v", err)
	}
	if pods, _ := c.k.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Fatalf("%d pod(s) left of a gang that could not be created whole", len(pods.Items))
	}
}
