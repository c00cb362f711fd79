package karpenter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/cloud/kubepool"
)

// Labels and resources the provider writes: a NodeClaim's run and token labels are kubepool's,
// so that one selector finds a run's objects whichever way it gets nodes.
const (
	LabelRun          = kubepool.LabelRun
	LabelToken        = kubepool.LabelToken
	LabelInstanceType = kubepool.LabelInstanceType
	// LabelCapacityType is Karpenter's market requirement and node label: on-demand or spot.
	LabelCapacityType = kubepool.LabelKarpenterCapacity
	ResourceGPU       = string(kubepool.ResourceGPU)
)

// NodeClaim conditions Karpenter sets.
const (
	CondLaunched    = "Launched"
	CondRegistered  = "Registered"
	CondInitialized = "Initialized"
	CondReady       = "Ready"
)

// NodeClaims is the resource of Karpenter's NodeClaims.
func NodeClaims() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
}

// claimName is the NodeClaim of a run's request's i-th node: the same for a repeated request.
func claimName(run, token string, i int) string {
	sum := sha256.Sum256([]byte(run + "\x00" + token))
	return fmt.Sprintf("rb-%s-%d", hex.EncodeToString(sum[:10]), i)
}

// newClaim is the NodeClaim of one node.
func (p *Provider) newClaim(name, token string, offer cloud.Offer) *unstructured.Unstructured {
	req := func(key, value string) any {
		return map[string]any{"key": key, "operator": "In", "values": []any{value}}
	}
	nc := p.cfg.NodeClass
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodeClaim",
		"metadata": map[string]any{
			"name":        name,
			"labels":      map[string]any{LabelRun: p.cfg.RunID, LabelToken: kubepool.TokenLabel(token)},
			"annotations": map[string]any{LabelToken: token},
		},
		"spec": map[string]any{
			"requirements": []any{req(LabelInstanceType, offer.InstanceType), req(LabelCapacityType, string(offer.Market))},
			"resources":    map[string]any{"requests": map[string]any{ResourceGPU: fmt.Sprint(p.cfg.GPUsPerNode)}},
			"nodeClassRef": map[string]any{"group": nc.Group, "kind": nc.Kind, "name": nc.Name},
		},
	}}
}

// Requirement is the single value a NodeClaim requires of key with operator In ("" when none).
func Requirement(obj *unstructured.Unstructured, key string) string {
	reqs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "requirements")
	for _, r := range reqs {
		m, ok := r.(map[string]any)
		if !ok || m["key"] != key || m["operator"] != "In" {
			continue
		}
		if vs, ok := m["values"].([]any); ok && len(vs) > 0 {
			s, _ := vs[0].(string)
			return s
		}
	}
	return ""
}

// Condition is a NodeClaim's condition of a type: its status ("" when absent), reason, message
// and time.
type Condition struct {
	Status, Reason, Message string
	At                      time.Time
}

// ConditionOf reads a NodeClaim's condition.
func ConditionOf(obj *unstructured.Unstructured, typ string) Condition {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		at, _ := time.Parse(time.RFC3339Nano, str("lastTransitionTime"))
		return Condition{Status: str("status"), Reason: str("reason"), Message: str("message"), At: at}
	}
	return Condition{}
}

// NodeName is the node a NodeClaim launched ("" until it registers).
func NodeName(obj *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(obj.Object, "status", "nodeName")
	return s
}
