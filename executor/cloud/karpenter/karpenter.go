package karpenter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/kubepool"
)

// NodeClassRef names the cloud's node class a NodeClaim launches from, such as EC2NodeClass
// default in group karpenter.k8s.aws.
type NodeClassRef struct {
	Group, Kind, Name string
}

// Config sets up the provider.
type Config struct {
	// Dynamic creates, reads and deletes NodeClaims; Client reads Nodes.
	Dynamic dynamic.Interface
	Client  kubernetes.Interface
	// RunID owns the NodeClaims: a provider opened with the same run ID finds them. It must be a
	// valid label value.
	RunID string
	// NodeClass is every NodeClaim's nodeClassRef (the CRD requires one).
	NodeClass NodeClassRef
	// GPUsPerNode is each NodeClaim's nvidia.com/gpu request.
	GPUsPerNode int
	// Offers are the instance types and markets the provider rents, at their prices; the first
	// is what a request that names no type or market asks for.
	Offers []cloud.Offer
	// Poll is how often Create looks at its NodeClaims while they launch (default 200ms): a
	// launch takes tens of seconds, and a run asks for a handful of nodes.
	Poll time.Duration
}

// Provider rents nodes as Karpenter NodeClaims. It keeps no state of its own (the NodeClaims
// are the state) and is safe for concurrent use.
type Provider struct {
	cfg Config
}

var _ cloud.Provider = (*Provider)(nil)

// New checks cfg.
func New(cfg Config) (*Provider, error) {
	switch {
	case cfg.Dynamic == nil || cfg.Client == nil:
		return nil, errors.New("karpenter: no Kubernetes client")
	case cfg.RunID == "":
		return nil, errors.New("karpenter: no run ID: NodeClaims would belong to no run")
	case len(validation.IsValidLabelValue(cfg.RunID)) > 0:
		return nil, fmt.Errorf("karpenter: run ID %q is not a label value", cfg.RunID)
	case cfg.GPUsPerNode < 1:
		return nil, fmt.Errorf("karpenter: %d GPUs per node", cfg.GPUsPerNode)
	case cfg.NodeClass.Group == "" || cfg.NodeClass.Kind == "" || cfg.NodeClass.Name == "":
		return nil, fmt.Errorf("karpenter: node class %+v: group, kind and name are required", cfg.NodeClass)
	case len(cfg.Offers) == 0:
		return nil, errors.New("karpenter: no offer (instance type, market, price)")
	}
	cfg.Offers = slices.Clone(cfg.Offers) // defaults filled in below are ours, not the caller's
	for i, o := range cfg.Offers {
		if o.InstanceType == "" {
			return nil, fmt.Errorf("karpenter: offer %d names no instance type", i)
		}
		if o.Market == "" {
			cfg.Offers[i].Market = cloud.OnDemand
		}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	return &Provider{cfg: cfg}, nil
}

// offer is the configured offer a request asks for.
func (p *Provider) offer(req cloud.Request) (cloud.Offer, error) {
	it, m := req.InstanceType, req.Market
	if it == "" {
		it = p.cfg.Offers[0].InstanceType
	}
	if m == "" {
		m = p.cfg.Offers[0].Market
	}
	var offered []string
	for _, o := range p.cfg.Offers {
		if o.InstanceType == it && o.Market == m {
			return o, nil
		}
		offered = append(offered, fmt.Sprintf("%s %s", o.Market, o.InstanceType))
	}
	return cloud.Offer{}, &cloud.CapacityError{InstanceType: it, Market: m,
		Reason: "this provider offers only " + strings.Join(offered, ", ")}
}

// Create makes a NodeClaim per node asked for (none that a request under the same Token made
// already) and waits until each has a Ready, initialised node.
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("karpenter: create: %w", err)
	}
	offer, err := p.offer(req)
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	if req.Count <= 0 {
		return nil, nil
	}
	token := req.Token
	if token == "" {
		token = kubepool.NewToken()
	}
	names := make([]string, req.Count)
	claims := p.cfg.Dynamic.Resource(NodeClaims())
	for i := range names {
		names[i] = claimName(p.cfg.RunID, token, i)
		_, err := claims.Create(ctx, p.newClaim(names[i], token, offer), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			// A create cut off half way may have made the NodeClaim: give up on all of them.
			return p.abandon(ctx, names[:i+1], nil, fmt.Errorf("create NodeClaim %s: %w", names[i], err))
		}
	}
	tick := time.NewTicker(p.cfg.Poll)
	defer tick.Stop()
	for {
		up, failed, err := p.look(ctx, names)
		switch {
		case err != nil && ctx.Err() == nil:
			return p.abandon(ctx, names, up, err)
		case len(up) == len(names):
			return p.nodes(names, up), nil
		case len(failed) > 0:
			return p.abandon(ctx, names, up, &cloud.CapacityError{InstanceType: offer.InstanceType, Market: offer.Market,
				Reason: fmt.Sprintf("%d of %d NodeClaim(s) failed to launch: %s", len(failed), len(names), strings.Join(failed, "; "))})
		}
		select {
		case <-ctx.Done():
			return p.abandon(ctx, names, up, fmt.Errorf("waiting for %d of %d node(s): %w", len(names)-len(up), len(names), ctx.Err()))
		case <-tick.C:
		}
	}
}

// abandon deletes the NodeClaims not up (whatever ctx does: one left would launch a machine
// nobody knows of) and returns the nodes up with err.
func (p *Provider) abandon(ctx context.Context, names []string, up map[string]cloud.Node, err error) ([]cloud.Node, error) {
	ctx = context.WithoutCancel(ctx)
	for _, name := range names {
		if _, ok := up[name]; ok {
			continue
		}
		if derr := p.cfg.Dynamic.Resource(NodeClaims()).Delete(ctx, name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("delete NodeClaim %s: %w", name, derr))
		}
	}
	return p.nodes(names, up), fmt.Errorf("karpenter: %w", err)
}

// nodes is the nodes up, in the order of names.
func (p *Provider) nodes(names []string, up map[string]cloud.Node) []cloud.Node {
	var out []cloud.Node
	for _, name := range names {
		if n, ok := up[name]; ok {
			out = append(out, n)
		}
	}
	return out
}

// look reads the NodeClaims named: those whose node is up (by NodeClaim name), and why others
// failed to launch.
func (p *Provider) look(ctx context.Context, names []string) (map[string]cloud.Node, []string, error) {
	up := map[string]cloud.Node{}
	var failed []string
	for _, name := range names {
		obj, err := p.cfg.Dynamic.Resource(NodeClaims()).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			failed = append(failed, name+" was deleted before its node came up")
			continue
		}
		if err != nil {
			return up, nil, fmt.Errorf("read NodeClaim %s: %w", name, err)
		}
		if c := ConditionOf(obj, CondLaunched); c.Status == string(metav1.ConditionFalse) {
			failed = append(failed, fmt.Sprintf("%s: %s %s", name, c.Reason, c.Message))
			continue
		}
		if obj.GetDeletionTimestamp() != nil {
			failed = append(failed, name+" is being deleted")
			continue
		}
		if NodeName(obj) == "" || ConditionOf(obj, CondInitialized).Status != string(metav1.ConditionTrue) {
			continue
		}
		n, ready, err := p.node(ctx, obj)
		if err != nil {
			return up, nil, err
		}
		if n != nil && ready {
			up[name] = *n
		}
	}
	return up, failed, nil
}

// node describes a NodeClaim's node (nil when it does not exist), and says whether it is Ready.
func (p *Provider) node(ctx context.Context, obj *unstructured.Unstructured) (*cloud.Node, bool, error) {
	k, err := p.cfg.Client.CoreV1().Nodes().Get(ctx, NodeName(obj), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read node %s: %w", NodeName(obj), err)
	}
	offer := cloud.Offer{InstanceType: Requirement(obj, LabelInstanceType), Market: cloud.Market(Requirement(obj, LabelCapacityType))}
	for _, o := range p.cfg.Offers {
		if o.InstanceType == offer.InstanceType && o.Market == offer.Market {
			offer.PricePerHour = o.PricePerHour
		}
	}
	at := ConditionOf(obj, CondLaunched).At
	if at.IsZero() {
		at = obj.GetCreationTimestamp().Time
	}
	n := offer.Stamp(cloud.Node{ID: k.Name, GPUs: gpus(k, p.cfg.GPUsPerNode), Addr: kubepool.InternalIP(k), RunningAt: at,
		Token: obj.GetAnnotations()[LabelToken]})
	return &n, kubepool.Ready(k), nil
}

// gpus is a node's allocatable GPUs, or what was asked while its device plugin has not
// reported them.
func gpus(n *corev1.Node, asked int) int {
	if g := kubepool.GPUs(n); g > 0 {
		return g
	}
	return asked
}

// mine lists this run's NodeClaims that are not being deleted.
func (p *Provider) mine(ctx context.Context) ([]unstructured.Unstructured, error) {
	list, err := p.cfg.Dynamic.Resource(NodeClaims()).List(ctx, metav1.ListOptions{LabelSelector: LabelRun + "=" + p.cfg.RunID})
	if err != nil {
		return nil, fmt.Errorf("list NodeClaims: %w", err)
	}
	var out []unstructured.Unstructured
	for _, obj := range list.Items {
		if obj.GetDeletionTimestamp() == nil {
			out = append(out, obj)
		}
	}
	return out, nil
}

// Delete deletes this run's NodeClaims whose nodes are named; unknown names are not an error.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	claims, err := p.mine(ctx)
	if err != nil {
		return fmt.Errorf("karpenter: %w", err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, obj := range claims {
		if !want[NodeName(&obj)] {
			continue
		}
		err := p.cfg.Dynamic.Resource(NodeClaims()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("karpenter: delete NodeClaim %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// List returns the nodes of this run's NodeClaims that have one.
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	claims, err := p.mine(ctx)
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	var out []cloud.Node
	for _, obj := range claims {
		if NodeName(&obj) == "" {
			continue
		}
		// Listed Ready or not: a node gone NotReady is still rented, and billed.
		n, _, err := p.node(ctx, &obj)
		if err != nil {
			return nil, fmt.Errorf("karpenter: %w", err)
		}
		if n != nil {
			out = append(out, *n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
