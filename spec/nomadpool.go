package spec

import (
	"unicode/utf8"
)

// NomadPool selects the clients of a team's existing Nomad cluster that a run may claim
// (--backend nomad, with NOMAD_ADDR naming the cluster). A client must match every filter
// given.
type NomadPool struct {
	// NodePool is the Nomad node pool the clients belong to; jobs run in it too.
	NodePool string `yaml:"node_pool"`
	// Datacenter is the clients' datacenter.
	Datacenter string `yaml:"datacenter"`
	// Class is the clients' node class.
	Class string `yaml:"class"`
	// Meta holds node meta values a client must carry, by key.
	Meta map[string]string `yaml:"meta"`
}

// Nomad pool limits.
const (
	// MaxNomadNameLen bounds a class and a meta key or value, as Nomad bounds node pool and
	// datacenter names.
	MaxNomadNameLen = 128
	// MaxNomadMeta bounds the meta filters.
	MaxNomadMeta = 64
)

var (
	// nomadNameRE is what Nomad accepts as a node pool or datacenter name.
	nomadNameRE = lazyRegexp(`^[a-zA-Z0-9-_.]{1,128}$`)
	// nomadMetaKeyRE keeps a key usable in a constraint as ${meta.KEY}.
	nomadMetaKeyRE = lazyRegexp(`^[a-zA-Z0-9_.-]{1,128}$`)
)

func (v *validator) nomadPool() {
	n := v.e.Cluster.Nomad
	if n == nil {
		return
	}
	if n.NodePool == "" && n.Datacenter == "" && n.Class == "" && len(n.Meta) == 0 {
		v.add("cluster.nomad", "needs at least one filter (node_pool, datacenter, class or meta): without one every client of the cluster would do")
	}
	for _, f := range []struct{ field, value string }{{"node_pool", n.NodePool}, {"datacenter", n.Datacenter}} {
		if f.value != "" && !nomadNameRE().MatchString(f.value) {
			v.add("cluster.nomad."+f.field, "%q is not a Nomad name (1 to 128 letters, digits, '-', '_' or '.')", f.value)
		}
	}
	if l := utf8.RuneCountInString(n.Class); l > MaxNomadNameLen {
		v.add("cluster.nomad.class", "is %d characters long (at most %d)", l, MaxNomadNameLen)
	}
	if len(n.Meta) > MaxNomadMeta {
		v.add("cluster.nomad.meta", "holds %d filters (at most %d)", len(n.Meta), MaxNomadMeta)
		return
	}
	for _, k := range sortedKeys(n.Meta) {
		switch {
		case !nomadMetaKeyRE().MatchString(k):
			v.add("cluster.nomad.meta."+k, "not a meta key (1 to 128 letters, digits, '-', '_' or '.')")
		case utf8.RuneCountInString(n.Meta[k]) > MaxNomadNameLen:
			v.add("cluster.nomad.meta."+k, "the value is %d characters long (at most %d)", utf8.RuneCountInString(n.Meta[k]), MaxNomadNameLen)
		}
	}
}
