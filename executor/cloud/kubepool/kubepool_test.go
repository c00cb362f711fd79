package kubepool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/kubepool"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/executor/kube/admit"
	"github.com/rubberband-hpo/rubberband/internal/testkit/kubeaccess"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/spec"
)

var kube *servers.Kube

func TestMain(m *testing.M) { os.Exit(servers.KubeMain(m, &kube)) }

// pool is a test's own nodes (cluster-scoped, so named and labelled after the test's namespace)
// and the namespace of its Leases.
type pool struct {
	k        *servers.Kube
	ns       string
	selector labels.Selector
}

func newPool(t *testing.T) pool {
	k := servers.NeedKube(t, kube)
	ns := k.Namespace(t)
	return pool{k: k, ns: ns, selector: labels.SelectorFromSet(labels.Set{"pool": ns})}
}

// node is a node to add: each field left zero is a matching node's.
type node struct {
	name         string
	gpus         int64
	instanceType string
	labels       map[string]string
	notReady     bool
	cordoned     bool
	taints       []corev1.Taint
	outside      bool // not in the pool's selector
}

// add creates a node as a kubelet would register it: Ready, with an InternalIP and allocatable
// GPUs. It returns the node's name.
func (pl pool) add(t *testing.T, s node) string {
	t.Helper()
	ctx := context.Background()
	if s.gpus == 0 {
		s.gpus = 2
	}
	if s.instanceType == "" {
		s.instanceType = "a100x2"
	}
	lb := map[string]string{"pool": pl.ns, kubepool.LabelInstanceType: s.instanceType}
	if s.outside {
		lb["pool"] = "elsewhere"
	}
	for k, v := range s.labels {
		lb[k] = v
	}
	status := corev1.ConditionTrue
	if s.notReady {
		status = corev1.ConditionFalse
	}
	name := pl.ns + "-" + s.name
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lb},
		Spec: corev1.NodeSpec{Unschedulable: s.cordoned, Taints: s.taints}}
	n, err := pl.k.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpus := corev1.ResourceList{kubepool.ResourceGPU: *resource.NewQuantity(s.gpus, resource.DecimalSI)}
	n.Status = corev1.NodeStatus{Capacity: gpus, Allocatable: gpus,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}
	if n, err = pl.k.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server taints a new node not-ready (admission); the node lifecycle controller, which
	// this control plane lacks, lifts the taint once the node is Ready.
	n.Spec.Taints = s.taints
	if _, err := pl.k.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.k.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// pod binds a pod requesting gpus to a node, labelled as run's when run is not empty.
func (pl pool) pod(t *testing.T, node, run string, gpus int64) {
	t.Helper()
	q := corev1.ResourceList{kubepool.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	lb := map[string]string{}
	if run != "" {
		lb[kubepool.LabelRun] = run
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "gpu-", Namespace: pl.ns, Labels: lb},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none",
			Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}}}}
	if _, err := pl.k.Client.CoreV1().Pods(pl.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (pl pool) provider(t *testing.T, run string, change ...func(*kubepool.Config)) *kubepool.Provider {
	t.Helper()
	cfg := kubepool.Config{Client: pl.k.Client, LeaseNamespace: pl.ns, Selector: pl.selector, RunID: run, GPUsPerNode: 2,
		OnDemandPrice: 3, SpotPrice: 1}
	for _, c := range change {
		c(&cfg)
	}
	p, err := kubepool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// leases is the claim Leases of the namespace: node -> holder.
func (pl pool) leases(t *testing.T) map[string]string {
	t.Helper()
	list, err := pl.k.Client.CoordinationV1().Leases(pl.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range list.Items {
		out[strings.TrimPrefix(l.Name, kubepool.LeasePrefix)] = holder(l)
	}
	return out
}

func holder(l coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func ids(nodes []cloud.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	slices.Sort(out)
	return out
}

// The Provider contract over three matching nodes, a fresh run ID per case, as a ServiceAccount
// with exactly the driver's RBAC rules.
func TestContract(t *testing.T) {
	pl := newPool(t)
	driver, err := kubernetes.NewForConfig(kubeaccess.Bind(t, pl.k, pl.ns, "driver",
		admit.Objects(admit.Access{Namespace: pl.ns, ServiceAccount: "driver", Nodes: spec.KubeNodesPool})))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pl.add(t, node{name: fmt.Sprintf("gpu-%d", i)})
	}
	pl.add(t, node{name: "spot", labels: map[string]string{kubepool.LabelKarpenterCapacity: "spot"}})
	offer := cloud.Offer{InstanceType: "a100x2", Market: cloud.OnDemand, PricePerHour: 3}
	runs := 0
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			runs++
			run := fmt.Sprintf("contract-%d", runs)
			open := func(t *testing.T) cloud.Provider {
				return pl.provider(t, run, func(c *kubepool.Config) {
					c.Client, c.InstanceType, c.Market = driver, offer.InstanceType, offer.Market
				})
			}
			return open(t), open
		},
		GPUsPerNode: 2,
		Offer:       offer,
		Reclaims:    true,
		Tokens:      true,
	})
	if left := pl.leases(t); len(left) != 0 {
		t.Fatalf("leases left after the contract: %v", left)
	}
}

// Only Ready, schedulable, untainted nodes of the pool with the GPUs free of other runs' pods are
// claimed; the capacity error says why each other node was left out; a tolerated GPU taint and
// this run's own pods do not keep a node out.
func TestSelection(t *testing.T) {
	pl := newPool(t)
	ctx := context.Background()
	good := []string{
		pl.add(t, node{name: "plain"}),
		pl.add(t, node{name: "gpu-taint", taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}}),
		pl.add(t, node{name: "own-pods"}),
		pl.add(t, node{name: "half-used", gpus: 4}),
		pl.add(t, node{name: "prefer", taints: []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}}),
	}
	pl.pod(t, pl.ns+"-own-pods", "run-a", 2)
	pl.pod(t, pl.ns+"-half-used", "someone", 2)
	pl.add(t, node{name: "not-ready", notReady: true})
	pl.add(t, node{name: "cordoned", cordoned: true})
	pl.add(t, node{name: "tainted", taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}})
	pl.add(t, node{name: "evicting", taints: []corev1.Taint{{Key: "karpenter.sh/disruption", Value: "disrupted", Effect: corev1.TaintEffectNoExecute}}})
	busy := pl.add(t, node{name: "busy"})
	pl.pod(t, busy, "", 1)
	pl.add(t, node{name: "small", gpus: 1})
	pl.add(t, node{name: "outside", outside: true})
	pl.add(t, node{name: "other-type", instanceType: "t4x2"})
	held := pl.add(t, node{name: "held"})
	if _, err := pl.provider(t, "run-b").Create(ctx, cloud.Request{Count: 1}); err != nil {
		t.Fatal(err)
	}
	if got := pl.leases(t); len(got) != 1 {
		t.Fatalf("run-b's one claim: %v", got)
	}
	// run-b claimed the first free node by name: find which, so the rest can be checked.
	var bNode string
	for n := range pl.leases(t) {
		bNode = n
	}
	want := slices.DeleteFunc(append(slices.Clone(good), held), func(n string) bool { return n == bNode })
	slices.Sort(want)

	a := pl.provider(t, "run-a", func(c *kubepool.Config) { c.InstanceType = "a100x2" })
	got, err := a.Create(ctx, cloud.Request{Count: 10})
	var capacity *cloud.CapacityError
	if !errors.As(err, &capacity) {
		t.Fatalf("create 10 of 5 free: %v, %v", ids(got), err)
	}
	if !slices.Equal(ids(got), want) {
		t.Fatalf("claimed %v, want %v", ids(got), want)
	}
	for _, part := range []string{"12 node(s) match", "5 of them free", "1 not ready", "1 cordoned", "2 tainted", "2 busy", "1 held by another run", "10 wanted, 5 claimed"} {
		if !strings.Contains(capacity.Reason, part) {
			t.Errorf("capacity error %q does not say %q", capacity.Reason, part)
		}
	}
	// Every node claimed has 2 GPUs free of other runs' pods (half-used has 4, 2 of them busy).
	listed, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(got, listed...) {
		if n.Addr != "10.0.0.1" || n.InstanceType != "a100x2" || n.Market != cloud.OnDemand || n.PricePerHour != 3 || n.GPUs != 2 {
			t.Errorf("node %+v", n)
		}
	}
}

// A node's market is read from each cloud's capacity label, priced at the configured rate, and a
// request for a market claims only its nodes.
func TestMarkets(t *testing.T) {
	pl := newPool(t)
	ctx := context.Background()
	markets := map[string]cloud.Market{
		pl.add(t, node{name: "karpenter-spot", labels: map[string]string{kubepool.LabelKarpenterCapacity: "spot"}}):    cloud.Spot,
		pl.add(t, node{name: "karpenter-od", labels: map[string]string{kubepool.LabelKarpenterCapacity: "on-demand"}}): cloud.OnDemand,
		pl.add(t, node{name: "eks-spot", labels: map[string]string{kubepool.LabelEKSCapacity: "SPOT"}}):                cloud.Spot,
		pl.add(t, node{name: "eks-od", labels: map[string]string{kubepool.LabelEKSCapacity: "ON_DEMAND"}}):             cloud.OnDemand,
		pl.add(t, node{name: "gke-spot", labels: map[string]string{kubepool.LabelGKESpot: "true"}}):                    cloud.Spot,
		pl.add(t, node{name: "aks-spot", labels: map[string]string{kubepool.LabelAKSPriority: "spot"}}):                cloud.Spot,
		pl.add(t, node{name: "aks-regular", labels: map[string]string{kubepool.LabelAKSPriority: "regular"}}):          cloud.OnDemand,
		pl.add(t, node{name: "unlabelled"}): cloud.OnDemand,
	}
	p := pl.provider(t, "run-m")
	spot, err := p.Create(ctx, cloud.Request{Count: 4, Market: cloud.Spot})
	if err != nil || len(spot) != 4 {
		t.Fatalf("create 4 spot: %v, %v", ids(spot), err)
	}
	onDemand, err := p.Create(ctx, cloud.Request{Count: 4, Market: cloud.OnDemand})
	if err != nil || len(onDemand) != 4 {
		t.Fatalf("create 4 on-demand: %v, %v", ids(onDemand), err)
	}
	listed, err := p.List(ctx)
	if err != nil || len(listed) != 8 {
		t.Fatalf("list: %v, %v", ids(listed), err)
	}
	for _, n := range listed {
		price := map[cloud.Market]float64{cloud.Spot: 1, cloud.OnDemand: 3}[markets[n.ID]]
		if n.Market != markets[n.ID] || n.PricePerHour != price {
			t.Errorf("node %s: market %s at %v, want %s at %v", n.ID, n.Market, n.PricePerHour, markets[n.ID], price)
		}
	}
	for _, n := range spot {
		if markets[n.ID] != cloud.Spot {
			t.Errorf("a spot request claimed %s, a %s node", n.ID, markets[n.ID])
		}
	}
}

// Two runs asking for every node at once, in one Lease namespace: each node goes to exactly one.
func TestConcurrentRunsNeverShare(t *testing.T) {
	pl := newPool(t)
	ctx := context.Background()
	var all []string
	for i := range 6 {
		all = append(all, pl.add(t, node{name: fmt.Sprintf("n%d", i)}))
	}
	slices.Sort(all)
	for round := range 5 {
		ps := []*kubepool.Provider{pl.provider(t, fmt.Sprintf("race-%d-a", round)), pl.provider(t, fmt.Sprintf("race-%d-b", round))}
		got := make([][]cloud.Node, 2)
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], _ = p.Create(ctx, cloud.Request{Count: 6})
			}()
		}
		wg.Wait()
		both := append(ids(got[0]), ids(got[1])...)
		slices.Sort(both)
		if !slices.Equal(both, all) {
			t.Fatalf("round %d: the runs got %v and %v; want each of %v exactly once", round, ids(got[0]), ids(got[1]), all)
		}
		leases := pl.leases(t)
		for i, p := range ps {
			for _, n := range got[i] {
				if leases[n.ID] != fmt.Sprintf("race-%d-%c", round, 'a'+i) {
					t.Fatalf("round %d: node %s is leased to %q", round, n.ID, leases[n.ID])
				}
			}
			if err := p.Delete(ctx, ids(got[i])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if left := pl.leases(t); len(left) != 0 {
		t.Fatalf("leases left: %v", left)
	}
}

// Another run's Delete leaves a run's Lease; a node deleted from the cluster is gone from List
// and its Lease is released; the holder's Delete makes a node another's to claim.
func TestReleaseAndLostNode(t *testing.T) {
	pl := newPool(t)
	ctx := context.Background()
	x, y := pl.add(t, node{name: "x"}), pl.add(t, node{name: "y"})
	a, b := pl.provider(t, "run-a"), pl.provider(t, "run-b")
	before := time.Now()
	got, err := a.Create(ctx, cloud.Request{Count: 2, Token: "t1"})
	if err != nil || !slices.Equal(ids(got), []string{x, y}) {
		t.Fatalf("create: %v, %v", ids(got), err)
	}
	if got[0].RunningAt.Before(before.Add(-time.Second)) || got[0].Token != "t1" {
		t.Fatalf("node %+v", got[0])
	}
	if err := b.Delete(ctx, []string{x, y}); err != nil {
		t.Fatal(err)
	}
	if held, err := a.List(ctx); err != nil || !slices.Equal(ids(held), []string{x, y}) {
		t.Fatalf("a holds %v (%v) after b's delete", ids(held), err)
	}
	if err := pl.k.Client.CoreV1().Nodes().Delete(ctx, x, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if held, err := a.List(ctx); err != nil || !slices.Equal(ids(held), []string{y}) {
		t.Fatalf("a holds %v (%v) after %s left the cluster", ids(held), err, x)
	}
	if leases := pl.leases(t); len(leases) != 1 || leases[y] != "run-a" {
		t.Fatalf("leases %v: want only a's of %s", leases, y)
	}
	if none, err := b.Create(ctx, cloud.Request{Count: 1}); len(none) != 0 || err == nil {
		t.Fatalf("b claimed %v (%v) with every node held", ids(none), err)
	}
	if err := a.Delete(ctx, []string{y}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Create(ctx, cloud.Request{Count: 1}); err != nil || !slices.Equal(ids(got), []string{y}) {
		t.Fatalf("b after a's release: %v, %v", ids(got), err)
	}
}

// New refuses a configuration that no run would own or that claims nothing.
func TestNewRefuses(t *testing.T) {
	k := servers.NeedKube(t, kube)
	good := func() kubepool.Config {
		return kubepool.Config{Client: k.Client, LeaseNamespace: "leases", RunID: "run-1", GPUsPerNode: 2}
	}
	if _, err := kubepool.New(good()); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for name, change := range map[string]func(c *kubepool.Config){
		"no client":                  func(c *kubepool.Config) { c.Client = nil },
		"no lease namespace":         func(c *kubepool.Config) { c.LeaseNamespace = "" },
		"no run ID":                  func(c *kubepool.Config) { c.RunID = "" },
		"a run ID not a label value": func(c *kubepool.Config) { c.RunID = "run/1" },
		"no GPUs":                    func(c *kubepool.Config) { c.GPUsPerNode = 0 },
		"an unknown market":          func(c *kubepool.Config) { c.Market = "reserved" },
	} {
		c := good()
		change(&c)
		if _, err := kubepool.New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
