package nomadpool

import (
	"net"
	"strconv"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/spec"
)

// GPUMeta is the client meta key that says how many GPUs a client has, for clients whose GPUs
// Nomad does not fingerprint (no device plugin) or that should offer fewer.
const GPUMeta = "gpus"

// candidate is a client that matches the pool: what a claim records of it.
type candidate struct {
	id, name, addr, class string
	gpus                  int
}

// listed says whether a client of the node list may match, from what the list carries (no meta,
// no devices): it spares a lookup of every client of a large cluster.
func listed(s *nomad.NodeListStub, pool spec.NomadPool) bool {
	return s.Status == nomad.NodeStatusReady && s.SchedulingEligibility == nomad.NodeSchedulingEligible && !s.Drain &&
		within(pool, s.NodePool, s.Datacenter, s.NodeClass)
}

// match says whether a client belongs to the pool now, with minGPUs GPUs at least (a smaller one
// cannot hold the gangs the plan puts on a node), and describes it.
func match(n *nomad.Node, pool spec.NomadPool, minGPUs int) (candidate, bool) {
	if n.Status != nomad.NodeStatusReady || n.SchedulingEligibility != nomad.NodeSchedulingEligible || n.Drain ||
		!within(pool, n.NodePool, n.Datacenter, n.NodeClass) {
		return candidate{}, false
	}
	for k, v := range pool.Meta {
		if got, ok := n.Meta[k]; !ok || got != v {
			return candidate{}, false
		}
	}
	c := candidate{id: n.ID, name: n.Name, addr: addrOf(n), class: n.NodeClass, gpus: gpusOf(n, minGPUs)}
	return c, c.gpus >= minGPUs && c.addr != ""
}

// within checks the filters the node list can answer.
func within(pool spec.NomadPool, nodePool, dc, class string) bool {
	return (pool.NodePool == "" || pool.NodePool == nodePool) && (pool.Datacenter == "" || pool.Datacenter == dc) &&
		(pool.Class == "" || pool.Class == class)
}

// gpusOf is a client's GPU count: its meta gpus when that is a number, else the healthy
// nvidia/gpu instances it fingerprints, else def (the spec's gpus_per_node: a client that says
// nothing is taken at the spec's word).
func gpusOf(n *nomad.Node, def int) int {
	if g, err := strconv.Atoi(n.Meta[GPUMeta]); err == nil && g >= 0 {
		return g
	}
	if d := nvidiaGPUs(n); d > 0 {
		return d
	}
	return def
}

// nvidiaGPUs counts the healthy nvidia/gpu device instances a client fingerprints.
func nvidiaGPUs(n *nomad.Node) int {
	if n.NodeResources == nil {
		return 0
	}
	count := 0
	for _, d := range n.NodeResources.Devices {
		if d.Vendor != "nvidia" || d.Type != "gpu" {
			continue
		}
		for _, inst := range d.Instances {
			if inst.Healthy {
				count++
			}
		}
	}
	return count
}

// addrOf is where a client's workers are reached: the host of its advertised HTTP address,
// else (none, or a wildcard such as 0.0.0.0) its fingerprinted IP address.
func addrOf(n *nomad.Node) string {
	if host, _, err := net.SplitHostPort(n.HTTPAddr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			return host
		}
	}
	return n.Attributes["unique.network.ip-address"]
}
