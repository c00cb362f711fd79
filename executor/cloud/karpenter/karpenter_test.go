package karpenter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/karpenter"
	"github.com/rubberband-hpo/rubberband/executor/cloud/karpenter/karpentertest"
	"github.com/rubberband-hpo/rubberband/executor/cloud/providertest"
	"github.com/rubberband-hpo/rubberband/executor/kube/admit"
	"github.com/rubberband-hpo/rubberband/internal/testkit/kubeaccess"
	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
	"github.com/rubberband-hpo/rubberband/spec"
)

var kube *servers.Kube

func TestMain(m *testing.M) { os.Exit(servers.KubeMain(m, &kube)) }

// latency is the machines' start-up: short, as a test's must be, but long enough for a Create
// to be cancelled half way.
const latency = 300 * time.Millisecond

var (
	onDemand = cloud.Offer{InstanceType: "p4d.24xlarge", Market: cloud.OnDemand, PricePerHour: 32.77}
	spot     = cloud.Offer{InstanceType: "p4d.24xlarge", Market: cloud.Spot, PricePerHour: 11.57}
	g5       = cloud.Offer{InstanceType: "g5.12xlarge", Market: cloud.Spot, PricePerHour: 2.1}
)

// env is a test's control plane with the NodeClaim CRD, and a fulfiller playing Karpenter until
// the test ends.
type env struct {
	k    *servers.Kube
	dyn  dynamic.Interface
	run  string // the test's run ID prefix (its namespace: unique)
	fill *karpentertest.Fulfiller
}

func newEnv(t *testing.T, opts karpentertest.Options) env {
	k := servers.NeedKube(t, kube)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.InstallCRD(ctx, servers.NodeClaimCRD(t)); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(k.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Latency == 0 {
		opts.Latency = latency
	}
	fill, err := karpentertest.Fulfil(t.Context(), dyn, k.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fill.Err(); err != nil {
			t.Errorf("fulfiller: %v", err)
		}
	})
	return env{k: k, dyn: dyn, run: k.Namespace(t), fill: fill}
}

func (e env) provider(t *testing.T, run string) *karpenter.Provider {
	return e.providerAs(t, run, e.dyn, e.k.Client)
}

func (e env) providerAs(t *testing.T, run string, dyn dynamic.Interface, client kubernetes.Interface) *karpenter.Provider {
	t.Helper()
	p, err := karpenter.New(karpenter.Config{Dynamic: dyn, Client: client, RunID: run, GPUsPerNode: 8,
		NodeClass: karpenter.NodeClassRef{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		Offers:    []cloud.Offer{onDemand, spot, g5}, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// claims is a run's NodeClaims, by name.
func (e env) claims(t *testing.T, run string) map[string]*unstructured.Unstructured {
	t.Helper()
	list, err := e.dyn.Resource(karpenter.NodeClaims()).List(context.Background(), metav1.ListOptions{LabelSelector: karpenter.LabelRun + "=" + run})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out
}

func ids(nodes []cloud.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	slices.Sort(out)
	return out
}

func held(t *testing.T, p cloud.Provider) []string {
	t.Helper()
	nodes, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ids(nodes)
}

// The Provider contract, a fresh run ID per case, cancelling a Create while its machines start,
// as a ServiceAccount with exactly the driver's RBAC rules.
func TestContract(t *testing.T) {
	e := newEnv(t, karpentertest.Options{})
	cfg := kubeaccess.Bind(t, e.k, e.run, "driver", admit.Objects(admit.Access{Namespace: e.run, ServiceAccount: "driver", Nodes: spec.KubeNodesKarpenter}))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) (cloud.Provider, func(t *testing.T) cloud.Provider) {
			runs++
			run := fmt.Sprintf("%s-%d", e.run, runs)
			open := func(t *testing.T) cloud.Provider { return e.providerAs(t, run, dyn, client) }
			return open(t), open
		},
		GPUsPerNode: 8,
		Offer:       onDemand,
		CancelAfter: latency / 3,
		Tokens:      true,
	})
}

// A NodeClaim asks for what the request asked: its instance type and market as requirements, the
// GPUs per node, the configured node class, the run and token labels; its node is described at
// the offer's price, running from the Launched condition; a repeated request creates nothing.
func TestNodeClaimsAskWhatWasRequested(t *testing.T) {
	e := newEnv(t, karpentertest.Options{})
	ctx := context.Background()
	p := e.provider(t, e.run)
	before := time.Now()
	got, err := p.Create(ctx, cloud.Request{Count: 2, InstanceType: g5.InstanceType, Market: cloud.Spot, Token: "tok/1"})
	if err != nil || len(got) != 2 {
		t.Fatalf("create: %v, %v", got, err)
	}
	claims := e.claims(t, e.run)
	if len(claims) != 2 {
		t.Fatalf("%d NodeClaims, want 2", len(claims))
	}
	byNode := map[string]*unstructured.Unstructured{}
	for _, c := range claims {
		byNode[karpenter.NodeName(c)] = c
		if it, ct := karpenter.Requirement(c, karpenter.LabelInstanceType), karpenter.Requirement(c, karpenter.LabelCapacityType); it != g5.InstanceType || ct != "spot" {
			t.Errorf("NodeClaim %s requires %s %s, want g5.12xlarge spot", c.GetName(), it, ct)
		}
		if g, _, _ := unstructured.NestedString(c.Object, "spec", "resources", "requests", karpenter.ResourceGPU); g != "8" {
			t.Errorf("NodeClaim %s requests %q GPUs, want 8", c.GetName(), g)
		}
		if ref, _, _ := unstructured.NestedStringMap(c.Object, "spec", "nodeClassRef"); ref["group"] != "karpenter.k8s.aws" || ref["kind"] != "EC2NodeClass" || ref["name"] != "default" {
			t.Errorf("NodeClaim %s nodeClassRef %v", c.GetName(), ref)
		}
		if c.GetLabels()[karpenter.LabelRun] != e.run || c.GetLabels()[karpenter.LabelToken] == "" || c.GetAnnotations()[karpenter.LabelToken] != "tok/1" {
			t.Errorf("NodeClaim %s labels %v annotations %v", c.GetName(), c.GetLabels(), c.GetAnnotations())
		}
	}
	for _, n := range got {
		c := byNode[n.ID]
		if c == nil {
			t.Fatalf("node %s is no NodeClaim's", n.ID)
		}
		launched := karpenter.ConditionOf(c, karpenter.CondLaunched).At
		if n.Market != cloud.Spot || n.InstanceType != g5.InstanceType || n.PricePerHour != g5.PricePerHour || n.GPUs != 8 ||
			n.Addr != "127.0.0.1" || n.Token != "tok/1" || !n.RunningAt.Equal(launched) || n.RunningAt.Before(before) {
			t.Errorf("node %+v (launched %v)", n, launched)
		}
	}
	again, err := p.Create(ctx, cloud.Request{Count: 2, InstanceType: g5.InstanceType, Market: cloud.Spot, Token: "tok/1"})
	if err != nil || !slices.Equal(ids(again), ids(got)) {
		t.Fatalf("the repeated request: %v, %v; want %v", ids(again), err, ids(got))
	}
	if n := len(e.claims(t, e.run)); n != 2 {
		t.Fatalf("%d NodeClaims after a repeated request, want 2", n)
	}
	if err := p.Delete(ctx, ids(got)); err != nil {
		t.Fatal(err)
	}
	if n := len(e.claims(t, e.run)); n != 0 {
		t.Fatalf("%d NodeClaims after deleting every node", n)
	}
}

// A NodeClaim whose launch fails makes Create return a *cloud.CapacityError with the nodes that
// came up; every other NodeClaim is deleted, and the provider holds exactly what it returned.
func TestLaunchFailure(t *testing.T) {
	e := newEnv(t, karpentertest.Options{Fail: func(name string) string {
		if strings.HasSuffix(name, "-1") {
			return "InsufficientInstanceCapacity: no p4d.24xlarge in the zone"
		}
		return ""
	}})
	ctx := context.Background()
	p := e.provider(t, e.run)
	got, err := p.Create(ctx, cloud.Request{Count: 3})
	var capacity *cloud.CapacityError
	if !errors.As(err, &capacity) || len(got) > 2 {
		t.Fatalf("create: %v, %v; want at most 2 nodes and a capacity error", ids(got), err)
	}
	if !strings.Contains(capacity.Reason, "InsufficientInstanceCapacity") || capacity.InstanceType != onDemand.InstanceType {
		t.Errorf("capacity error %+v", capacity)
	}
	t.Logf("came up: %v; %v", ids(got), err)
	claims := e.claims(t, e.run)
	if len(claims) != len(got) {
		t.Fatalf("%d NodeClaims left, %d nodes returned: the rest must be deleted", len(claims), len(got))
	}
	for _, c := range claims {
		if strings.HasSuffix(c.GetName(), "-1") || !slices.Contains(ids(got), karpenter.NodeName(c)) {
			t.Errorf("NodeClaim %s (node %q) left, not among those returned", c.GetName(), karpenter.NodeName(c))
		}
	}
	if h := held(t, p); !slices.Equal(h, ids(got)) {
		t.Fatalf("held %v, returned %v", h, ids(got))
	}
}

// A spot reclaim taints the node, then deletes its NodeClaim: the node goes away and List stops
// naming it; the other node stays. Another run's Delete of a node touches nothing.
func TestReclaim(t *testing.T) {
	e := newEnv(t, karpentertest.Options{})
	ctx := context.Background()
	p := e.provider(t, e.run)
	got, err := p.Create(ctx, cloud.Request{Count: 2, Market: cloud.Spot})
	if err != nil || len(got) != 2 {
		t.Fatalf("create: %v, %v", got, err)
	}
	if err := e.provider(t, e.run+"-other").Delete(ctx, ids(got)); err != nil {
		t.Fatal(err)
	}
	if h := held(t, p); !slices.Equal(h, ids(got)) {
		t.Fatalf("held %v after another run's delete, want %v", h, ids(got))
	}
	var victim string
	for name, c := range e.claims(t, e.run) {
		if karpenter.NodeName(c) == got[0].ID {
			victim = name
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := e.k.Client.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=" + got[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := e.fill.Reclaim(ctx, victim); err != nil {
		t.Fatal(err)
	}
	tainted := false
	for ev := range w.ResultChan() {
		if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Modified {
			for _, taint := range n.Spec.Taints {
				tainted = tainted || (taint.Key == "karpenter.sh/disruption" && taint.Effect == corev1.TaintEffectNoSchedule)
			}
		}
		if ev.Type == watch.Deleted {
			break
		}
	}
	if wctx.Err() != nil {
		t.Fatalf("node %s still there after its reclaim", got[0].ID)
	}
	if !tainted {
		t.Errorf("node %s was deleted without the disruption taint first", got[0].ID)
	}
	if h := held(t, p); !slices.Equal(h, []string{got[1].ID}) {
		t.Fatalf("held %v after reclaiming %s, want [%s]", h, got[0].ID, got[1].ID)
	}
	// Delete terminates the machine: the node goes away with its NodeClaim.
	if err := p.Delete(ctx, []string{got[1].ID}); err != nil {
		t.Fatal(err)
	}
	if clock.Until(wctx, clock.Wall{}, 50*time.Millisecond, func() bool {
		_, err = e.k.Client.CoreV1().Nodes().Get(wctx, got[1].ID, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}) != nil {
		t.Fatalf("node %s still there after its Delete (%v)", got[1].ID, err)
	}
	if h := held(t, p); len(h) != 0 {
		t.Fatalf("held %v after deleting every node", h)
	}
}

// New refuses a configuration that would make NodeClaims the CRD rejects or no run owns.
func TestNewRefuses(t *testing.T) {
	k := servers.NeedKube(t, kube)
	dyn, err := dynamic.NewForConfig(k.Admin)
	if err != nil {
		t.Fatal(err)
	}
	good := func() karpenter.Config {
		return karpenter.Config{Dynamic: dyn, Client: k.Client, RunID: "run-1", GPUsPerNode: 8,
			NodeClass: karpenter.NodeClassRef{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}, Offers: []cloud.Offer{{InstanceType: "p4d.24xlarge"}}}
	}
	if _, err := karpenter.New(good()); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for name, change := range map[string]func(c *karpenter.Config){
		"no run ID":                  func(c *karpenter.Config) { c.RunID = "" },
		"a run ID not a label value": func(c *karpenter.Config) { c.RunID = "run/1" },
		"no GPUs":                    func(c *karpenter.Config) { c.GPUsPerNode = 0 },
		"no node class name":         func(c *karpenter.Config) { c.NodeClass.Name = "" },
		"no offer":                   func(c *karpenter.Config) { c.Offers = nil },
		"an offer without a type":    func(c *karpenter.Config) { c.Offers = []cloud.Offer{{Market: cloud.Spot}} },
		"no client":                  func(c *karpenter.Config) { c.Dynamic = nil },
	} {
		c := good()
		change(&c)
		if _, err := karpenter.New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
