package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rubberband-hpo/rubberband/checkpoint/file"
	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/gang/gangtest"
	"github.com/rubberband-hpo/rubberband/internal/testkit/kubenode"
	"github.com/rubberband-hpo/rubberband/internal/testkit/selfbin"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

// kubeCP is the package's control plane (TestMain); each test has a namespace and nodes of its
// own.
var kubeCP *servers.Kube

// TestMain makes this test binary the rubberband binary the pods run (Runtime.Self: selfbin),
// and runs the tests with one control plane.
func TestMain(m *testing.M) {
	selfbin.Dispatch("")
	os.Exit(servers.KubeMain(m, &kubeCP))
}

// cluster is a namespace with two agent nodes of two GPUs each, named after it.
type cluster struct {
	k     *servers.Kube
	ns    string
	agent *kubenode.Agent
	nodes []cloud.Node
	self  string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	k := servers.NeedKube(t, kubeCP)
	c := &cluster{k: k, ns: k.Namespace(t)}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c.self = self
	tls, err := k.ServingTLS()
	if err != nil {
		t.Fatal(err)
	}
	if c.agent, err = kubenode.Start(context.Background(), kubenode.Config{Client: k.Client, TLS: tls, Dir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.agent.Close)
	for _, n := range []string{"a", "b"} {
		name := c.ns + "-" + n
		if _, err := c.agent.AddNode(context.Background(), kubenode.Node{Name: name, GPUs: 2, CapacityType: "spot"}); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, cloud.Node{ID: name, GPUs: 2, Addr: "127.0.0.1", Market: cloud.Spot})
	}
	return c
}

// runtime is a Runtime in the cluster's namespace with its own checkpoint store and logs.
func (c *cluster) runtime(t *testing.T) (*Runtime, string) {
	dir := t.TempDir()
	store := filepath.Join(dir, "checkpoints")
	return &Runtime{Client: c.k.Client, Namespace: c.ns, Experiment: "gangtest", RunID: "r-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")),
		Self: c.self, StoreEnv: []string{"RB_CHECKPOINTS=file://" + store}, LogDir: filepath.Join(dir, "logs"),
		Grace: time.Second, PlaceTimeout: 20 * time.Second, Poll: 50 * time.Millisecond}, store
}

func TestRuntimeContract(t *testing.T) {
	gangtest.Run(t, func(t *testing.T) gangtest.Env {
		c := newCluster(t) // nodes of the case's own: one case taints one
		r, dir := c.runtime(t)
		store, err := file.New(dir)
		if err != nil {
			t.Fatal(err)
		}
		r.Store = store
		t.Cleanup(func() {
			pods, _ := c.k.Client.CoreV1().Pods(c.ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelRun + "=" + r.RunID})
			if pods != nil && len(pods.Items) != 0 {
				t.Errorf("pods left behind: %s", pods.Items[0].Name)
			}
		})
		return gangtest.Env{Runtime: r, Store: store, Nodes: c.nodes, Unplaceable: c.ns + "-z", LogDir: r.LogDir, Grace: r.Grace,
			Slack: 15 * time.Second,
			Interrupt: func(node, why string) {
				c.agent.Taint(context.Background(), node, corev1.Taint{Key: "karpenter.sh/disruption", Value: "disrupted", Effect: corev1.TaintEffectNoSchedule})
			}}
	})
}

// A pod left by a dead driver on a node that is gone since (a reclaimed spot node) has no kubelet
// to end it: Reap deletes it at once, as the pod garbage collector would, instead of waiting for
// ever.
func TestReapPodOfDeletedNode(t *testing.T) {
	c := newCluster(t)
	r, _ := c.runtime(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "left", Labels: map[string]string{LabelRun: r.RunID}},
		Spec: corev1.PodSpec{NodeName: c.nodes[0].ID, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "trainer", Image: "x", Command: []string{"sleep", "600"}}}}}
	if _, err := c.k.Client.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := clock.Until(ctx, clock.Wall{}, 50*time.Millisecond, func() bool { return c.agent.Processes() == 1 }); err != nil {
		t.Fatal("the pod never ran")
	}
	if err := c.agent.RemoveNode(ctx, c.nodes[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Reap(ctx); err != nil {
		t.Fatalf("reap with a pod of a deleted node: %v", err)
	}
	if _, err := c.k.Client.CoreV1().Pods(c.ns).Get(ctx, "left", metav1.GetOptions{}); err == nil {
		t.Fatal("the pod of the deleted node is still there")
	}
}

// A node deleted while a gang's pod waits on it to start (a spot node reclaimed between Launch's
// check of its nodes and the pod's start) makes the launch interrupted at once, naming the node,
// and leaves no pod: on main Launch waited the whole PlaceTimeout for a pod no kubelet would run,
// and a run on Karpenter's nodes stood still behind it.
func TestLaunchOnANodeDeletedBeforeThePodRan(t *testing.T) {
	c := newCluster(t)
	r, _ := c.runtime(t)
	r.PlaceTimeout = 5 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A node no agent serves: Ready, with GPUs, but its pods never start.
	name := c.ns + "-nokubelet"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	node, err := c.k.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.k.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	gpus := resource.MustParse("2")
	node.Status = corev1.NodeStatus{Capacity: corev1.ResourceList{"nvidia.com/gpu": gpus}, Allocatable: corev1.ResourceList{"nvidia.com/gpu": gpus},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}
	if _, err := c.k.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := gangOf("b0-t0001", []cloud.Node{{ID: name, GPUs: 2, Addr: "127.0.0.1"}}, 1, 0, 3, "")
	launched := make(chan error, 1)
	go func() {
		h, err := r.Launch(ctx, g)
		if err == nil {
			h.Stop()
			h.Wait()
		}
		launched <- err
	}()
	if err := clock.Until(ctx, clock.Wall{}, 50*time.Millisecond, func() bool {
		pods, err := c.k.Client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 1
	}); err != nil {
		t.Fatal("no pod was created")
	}
	if err := c.k.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-launched:
		var in *gang.InterruptedError
		if !errors.As(err, &in) || in.Node != name {
			t.Fatalf("launch: %v; want an *gang.InterruptedError naming node %s", err, name)
		}
	case <-ctx.Done():
		t.Fatal("Launch still waits a minute after its node was deleted")
	}
	if pods, err := c.k.Client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods left: %d (%v)", len(pods.Items), err)
	}
}
