package nomadpool

import (
	"testing"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/spec"
)

// A client matches when it passes every filter given, is ready and eligible, and has the GPUs;
// each case differs from the matching client in one thing.
func TestMatch(t *testing.T) {
	pool := spec.NomadPool{NodePool: "gpu", Datacenter: "dc1", Class: "a100", Meta: map[string]string{"team": "ml", "rack": "r1"}}
	base := func() *nomad.Node {
		return &nomad.Node{ID: "id-1", Name: "n1", Status: nomad.NodeStatusReady, SchedulingEligibility: nomad.NodeSchedulingEligible,
			NodePool: "gpu", Datacenter: "dc1", NodeClass: "a100", HTTPAddr: "10.0.0.7:4646",
			Meta: map[string]string{"team": "ml", "rack": "r1", "other": "x", "gpus": "4"}}
	}
	for _, c := range []struct {
		name   string
		change func(n *nomad.Node)
		pool   *spec.NomadPool
		want   bool
	}{
		{"matching", func(n *nomad.Node) {}, nil, true},
		{"another node pool", func(n *nomad.Node) { n.NodePool = "default" }, nil, false},
		{"another datacenter", func(n *nomad.Node) { n.Datacenter = "dc2" }, nil, false},
		{"another class", func(n *nomad.Node) { n.NodeClass = "t4" }, nil, false},
		{"another meta value", func(n *nomad.Node) { n.Meta["team"] = "web" }, nil, false},
		{"a meta key missing", func(n *nomad.Node) { delete(n.Meta, "rack") }, nil, false},
		{"down", func(n *nomad.Node) { n.Status = nomad.NodeStatusDown }, nil, false},
		{"initializing", func(n *nomad.Node) { n.Status = nomad.NodeStatusInit }, nil, false},
		{"ineligible", func(n *nomad.Node) { n.SchedulingEligibility = nomad.NodeSchedulingIneligible }, nil, false},
		{"draining", func(n *nomad.Node) { n.Drain = true }, nil, false},
		{"fewer GPUs than a node has", func(n *nomad.Node) { n.Meta["gpus"] = "2" }, nil, false},
		{"no address", func(n *nomad.Node) { n.HTTPAddr = "" }, nil, false},
		{"only the filters given", func(n *nomad.Node) { n.Datacenter, n.NodeClass = "dc9", "" }, &spec.NomadPool{NodePool: "gpu"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := base()
			c.change(n)
			p := pool
			if c.pool != nil {
				p = *c.pool
			}
			got, ok := match(n, p, 4)
			stub := &nomad.NodeListStub{Status: n.Status, SchedulingEligibility: n.SchedulingEligibility, Drain: n.Drain,
				NodePool: n.NodePool, Datacenter: n.Datacenter, NodeClass: n.NodeClass}
			if ok != c.want || (c.want && !listed(stub, p)) {
				t.Fatalf("match %v (listed %v), want %v", ok, listed(stub, p), c.want)
			}
			if ok && (got.id != "id-1" || got.addr != "10.0.0.7" || got.gpus != 4) {
				t.Fatalf("candidate %+v", got)
			}
		})
	}
}

// GPUs: the meta gpus, else the healthy nvidia/gpu instances fingerprinted, else the spec's.
func TestGPUs(t *testing.T) {
	devices := &nomad.NodeResources{Devices: []*nomad.NodeDeviceResource{
		{Vendor: "nvidia", Type: "gpu", Name: "A100", Instances: []*nomad.NodeDevice{{ID: "GPU-1", Healthy: true}, {ID: "GPU-2", Healthy: true}, {ID: "GPU-3"}}},
		{Vendor: "intel", Type: "gpu", Instances: []*nomad.NodeDevice{{ID: "i1", Healthy: true}}},
		{Vendor: "nvidia", Type: "fpga", Instances: []*nomad.NodeDevice{{ID: "f1", Healthy: true}}},
	}}
	for _, c := range []struct {
		name string
		node *nomad.Node
		want int
	}{
		{"meta", &nomad.Node{Meta: map[string]string{"gpus": "8"}, NodeResources: devices}, 8},
		{"devices", &nomad.Node{NodeResources: devices}, 2},
		{"meta not a number: devices", &nomad.Node{Meta: map[string]string{"gpus": "many"}, NodeResources: devices}, 2},
		{"neither: the spec's", &nomad.Node{}, 4},
	} {
		if got := gpusOf(c.node, 4); got != c.want {
			t.Errorf("%s: %d GPUs, want %d", c.name, got, c.want)
		}
	}
}

// The address: the advertised HTTP host, else the fingerprinted IP (also for a wildcard).
func TestAddr(t *testing.T) {
	attrs := map[string]string{"unique.network.ip-address": "10.1.2.3"}
	for _, c := range []struct{ http, want string }{
		{"10.0.0.7:4646", "10.0.0.7"}, {"[fd00::1]:4646", "fd00::1"}, {"0.0.0.0:4646", "10.1.2.3"}, {"", "10.1.2.3"},
	} {
		if got := addrOf(&nomad.Node{HTTPAddr: c.http, Attributes: attrs}); got != c.want {
			t.Errorf("HTTPAddr %q: %q, want %q", c.http, got, c.want)
		}
	}
}
