package kubepool

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Config sets up the provider.
type Config struct {
	// Client talks to the cluster: nodes and pods cluster-wide (read), Leases in LeaseNamespace.
	Client kubernetes.Interface
	// LeaseNamespace holds the claim Leases: runs that share a pool must share it.
	LeaseNamespace string
	// Selector chooses the team's nodes (nil: every node).
	Selector labels.Selector
	// RunID holds the Leases (their holderIdentity): a provider opened with the same run ID finds
	// them. It must be a valid label value.
	RunID string
	// GPUsPerNode is the least a node must have free.
	GPUsPerNode int
	// InstanceType and Market are what a request that names none asks for (the spec's cluster);
	// empty: any.
	InstanceType string
	Market       cloud.Market
	// OnDemandPrice and SpotPrice are what a node costs per hour, by its market.
	OnDemandPrice, SpotPrice float64
}

// Provider claims and releases a team's Kubernetes nodes. It keeps no state of its own (the
// Leases are the state) and is safe for concurrent use.
type Provider struct {
	cfg Config
}

var _ cloud.Provider = (*Provider)(nil)

// New checks cfg.
func New(cfg Config) (*Provider, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("kubepool: no Kubernetes client")
	case cfg.LeaseNamespace == "":
		return nil, errors.New("kubepool: no lease namespace")
	case cfg.RunID == "":
		return nil, errors.New("kubepool: no run ID: Leases would belong to no run")
	case len(validation.IsValidLabelValue(cfg.RunID)) > 0:
		return nil, fmt.Errorf("kubepool: run ID %q is not a label value", cfg.RunID)
	case cfg.GPUsPerNode < 1:
		return nil, fmt.Errorf("kubepool: %d GPUs per node", cfg.GPUsPerNode)
	case cfg.Market != "" && cfg.Market != cloud.OnDemand && cfg.Market != cloud.Spot:
		return nil, fmt.Errorf("kubepool: market %q", cfg.Market)
	}
	if cfg.Selector == nil {
		cfg.Selector = labels.Everything()
	}
	return &Provider{cfg: cfg}, nil
}

// Create claims req.Count free matching nodes, or gives back what an earlier request under the
// same Token claimed and claims only the rest.
func (p *Provider) Create(ctx context.Context, req cloud.Request) ([]cloud.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kubepool: create: %w", err)
	}
	req = p.defaults(req)
	if req.Market != "" && req.Market != cloud.OnDemand && req.Market != cloud.Spot {
		return nil, fmt.Errorf("kubepool: %w", &cloud.CapacityError{InstanceType: req.InstanceType, Market: req.Market,
			Reason: "a Kubernetes node is on-demand or spot"})
	}
	if req.Count <= 0 {
		return nil, nil
	}
	token := req.Token
	if token == "" {
		token = NewToken()
	}
	leases, err := p.leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubepool: create: %w", err)
	}
	nodes, err := p.nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubepool: create: %w", err)
	}
	var got []cloud.Node
	for _, l := range leases {
		if n, ok := nodes[l.node]; ok && l.run == p.cfg.RunID && l.token == token {
			got = append(got, p.node(l, n))
		}
	}
	if len(got) >= req.Count {
		return got, nil
	}
	used, err := p.used(ctx)
	if err != nil {
		return got, fmt.Errorf("kubepool: create: %w", err)
	}
	held := map[string]lease{}
	for _, l := range leases {
		held[l.node] = l
	}
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	matched, free := 0, 0
	left := map[string]int{}
	for _, name := range names {
		n := nodes[name]
		c, why := describe(n, used[name], p.cfg.GPUsPerNode)
		if (req.InstanceType != "" && c.instanceType != req.InstanceType) || (req.Market != "" && c.market != req.Market) {
			continue
		}
		matched++
		if l, ok := held[name]; ok {
			if l.run != p.cfg.RunID {
				left[whyHeld]++
			}
			continue // this run's, under another token: not free
		}
		if why != "" {
			left[why]++
			continue
		}
		free++
		if len(got) == req.Count {
			continue // counting the free ones, for the error below
		}
		if err := ctx.Err(); err != nil { // cancelled: claim no more
			return got, fmt.Errorf("kubepool: create: %w", err)
		}
		// Claimed whatever ctx does: a create cut off half way may have claimed the node without
		// our knowing, and a Lease the caller does not know of would hold it for ever.
		l, err := p.claim(context.WithoutCancel(ctx), name, token, c.gpus-int(used[name]))
		if apierrors.IsAlreadyExists(err) {
			free--
			left[whyHeld]++
			continue
		}
		if err != nil {
			return got, fmt.Errorf("kubepool: claim node %s: %w", name, err)
		}
		got = append(got, p.node(l, n))
	}
	if len(got) < req.Count {
		return got, fmt.Errorf("kubepool: %w", &cloud.CapacityError{InstanceType: req.InstanceType, Market: req.Market,
			Reason: fmt.Sprintf("%d node(s) match the selector, type and market, %d of them free%s; %d wanted, %d claimed",
				matched, free, reasons(left), req.Count, len(got))})
	}
	return got, nil
}

// defaults fills a request's empty type and market with the configured ones.
func (p *Provider) defaults(req cloud.Request) cloud.Request {
	if req.InstanceType == "" {
		req.InstanceType = p.cfg.InstanceType
	}
	if req.Market == "" {
		req.Market = p.cfg.Market
	}
	return req
}

// reasons says why nodes were left out, in a fixed order: ", left out: 2 cordoned, 1 busy".
func reasons(left map[string]int) string {
	var parts []string
	for _, why := range []string{whyNotReady, whyCordoned, whyTainted, whyNoAddr, whyBusy, whyHeld} {
		if left[why] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", left[why], why))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; left out: " + strings.Join(parts, ", ")
}

// nodes is the pool's nodes by name.
func (p *Provider) nodes(ctx context.Context) (map[string]*corev1.Node, error) {
	list, err := p.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: p.cfg.Selector.String()})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// used is the GPUs that other runs' non-terminated pods request, by node.
func (p *Provider) used(ctx context.Context) (map[string]int64, error) {
	pods, err := p.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx,
		metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	out := map[string]int64{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Spec.NodeName == "" || pod.Labels[LabelRun] == p.cfg.RunID {
			continue
		}
		out[pod.Spec.NodeName] += podGPUs(pod)
	}
	return out, nil
}

// Delete releases this run's Leases of the nodes named; other runs' Leases, unknown names and
// nodes not claimed are left alone.
func (p *Provider) Delete(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := p.release(ctx, id); err != nil {
			return fmt.Errorf("kubepool: %w", err)
		}
	}
	return nil
}

// List returns the nodes this run holds Leases on. A Lease whose node left the cluster (or the
// pool) is released instead: the executor learns the node is lost, and the Lease does not
// outlive the node.
func (p *Provider) List(ctx context.Context) ([]cloud.Node, error) {
	leases, err := p.leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubepool: %w", err)
	}
	var out []cloud.Node
	for _, l := range leases {
		if l.run != p.cfg.RunID {
			continue
		}
		n, err := p.cfg.Client.CoreV1().Nodes().Get(ctx, l.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && !p.cfg.Selector.Matches(labels.Set(n.Labels))) {
			if err := p.release(ctx, l.node); err != nil {
				return nil, fmt.Errorf("kubepool: %w", err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("kubepool: node %s: %w", l.node, err)
		}
		out = append(out, p.node(l, n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// node describes a claimed node.
func (p *Provider) node(l lease, n *corev1.Node) cloud.Node {
	c, _ := describe(n, 0, 0)
	price := p.cfg.OnDemandPrice
	if c.market == cloud.Spot {
		price = p.cfg.SpotPrice
	}
	gpus := c.gpus
	if l.gpus > 0 {
		gpus = l.gpus
	}
	return cloud.Node{ID: n.Name, GPUs: gpus, Addr: c.addr, RunningAt: l.at, InstanceType: c.instanceType, Market: c.market,
		PricePerHour: price, Token: l.token}
}

// NewToken is a request token for a caller that gave none: its request is claimed anew when
// repeated.
func NewToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "auto-" + hex.EncodeToString(b)
}

// TokenLabel is a token as a label value: itself when it is one, else a digest of it (an
// annotation LabelToken keeps it whole).
func TokenLabel(token string) string {
	if len(validation.IsValidLabelValue(token)) == 0 {
		return token
	}
	sum := sha256.Sum256([]byte(token))
	return "sha256-" + hex.EncodeToString(sum[:16])
}

// lease is one claim Lease, as the provider reads it.
type lease struct {
	node, run, token string
	at               time.Time
	gpus             int // free of other runs' pods when claimed (0: unknown)
}
