package kubepool

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
)

// Labels and resources the provider reads and writes.
const (
	// LabelRun names the run that holds a Lease, and marks a pod as a run's own.
	LabelRun = "rubberband.dev/run"
	// LabelToken is the request token a Lease was claimed under (a label-safe form of it; the
	// annotation of the same key holds it whole).
	LabelToken = "rubberband.dev/token"
	// LabelInstanceType is the well-known label of a node's instance type.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// ResourceGPU is the extended resource of NVIDIA's device plugin, and the key of its taint.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// LeasePrefix starts the name of every claim Lease: LeasePrefix + the node name.
	LeasePrefix = "rb-node-"
)

// The capacity-type labels of the clouds' node groups, which say whether a node is spot.
const (
	LabelKarpenterCapacity = "karpenter.sh/capacity-type"            // spot | on-demand
	LabelEKSCapacity       = "eks.amazonaws.com/capacityType"        // SPOT | ON_DEMAND
	LabelGKESpot           = "cloud.google.com/gke-spot"             // "true"
	LabelAKSPriority       = "kubernetes.azure.com/scalesetpriority" // spot | regular
)

// Market is how a node is rented, from its cloud's capacity label; a node that says nothing is
// on-demand (a team's own machines).
func Market(labels map[string]string) cloud.Market {
	switch {
	case labels[LabelKarpenterCapacity] == "spot",
		strings.EqualFold(labels[LabelEKSCapacity], "SPOT"),
		labels[LabelGKESpot] == "true",
		labels[LabelAKSPriority] == "spot":
		return cloud.Spot
	}
	return cloud.OnDemand
}

// Why a node of the pool is left out of a claim.
const (
	whyNotReady = "not ready"
	whyCordoned = "cordoned"
	whyTainted  = "tainted"
	whyNoAddr   = "without an InternalIP"
	whyBusy     = "busy"
	whyHeld     = "held by another run"
)

// candidate is a node of the pool that matches a request: what a claim needs of it.
type candidate struct {
	name, addr, instanceType string
	market                   cloud.Market
	gpus                     int
}

// describe says what a node is, and why it cannot be claimed now ("" when it can): used is the
// GPUs other runs' pods request on it, need the least it must have free.
func describe(n *corev1.Node, used int64, need int) (candidate, string) {
	c := candidate{name: n.Name, addr: InternalIP(n), instanceType: n.Labels[LabelInstanceType], market: Market(n.Labels),
		gpus: GPUs(n)}
	switch {
	case !Ready(n):
		return c, whyNotReady
	case n.Spec.Unschedulable:
		return c, whyCordoned
	case tainted(n):
		return c, whyTainted
	case c.addr == "":
		return c, whyNoAddr
	case int64(c.gpus)-used < int64(need):
		return c, whyBusy
	}
	return c, ""
}

// Ready says whether a node's Ready condition is True.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tainted says whether a taint keeps the trainers' pods off the node: they tolerate only the
// GPU taint that GPU node groups carry.
func tainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && t.Key != string(ResourceGPU) {
			return true
		}
	}
	return false
}

// InternalIP is a node's InternalIP address ("" when it has none): where its pods are reached.
func InternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// GPUs is a node's allocatable nvidia.com/gpu.
func GPUs(n *corev1.Node) int {
	q, ok := n.Status.Allocatable[ResourceGPU]
	if !ok {
		return 0
	}
	return int(q.Value())
}

// podGPUs is what a pod holds of a node's GPUs: the larger of its containers' sum and its
// largest init container, as the scheduler counts.
func podGPUs(p *corev1.Pod) int64 {
	var sum, initMax int64
	for _, c := range p.Spec.Containers {
		sum += request(c)
	}
	for _, c := range p.Spec.InitContainers {
		initMax = max(initMax, request(c))
	}
	return max(sum, initMax)
}

// request is a container's GPU request; extended resources default their request to the limit.
func request(c corev1.Container) int64 {
	q, ok := c.Resources.Requests[ResourceGPU]
	if !ok {
		q, ok = c.Resources.Limits[ResourceGPU]
	}
	if !ok {
		return 0
	}
	return q.Value()
}
