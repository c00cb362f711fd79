package admit

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Manifest is the objects as one YAML stream for `kubectl apply -f -`, after a comment that
// says why the driver needs each rule.
func Manifest(a Access, objs []runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# What rubberband's driver needs (nodes: %s), as ServiceAccount %s/%s:\n", a.nodes(), a.Namespace, a.ServiceAccount)
	for _, r := range Rules(a.Nodes) {
		scope := "namespace " + a.Namespace
		switch {
		case r.Cluster:
			scope = "cluster"
		case r.Leases && a.LeaseNamespace != "":
			scope = "namespace " + a.LeaseNamespace
		}
		group := r.APIGroups[0]
		if group == "" {
			group = "core"
		}
		fmt.Fprintf(&b, "#   %s %s (%s, %s): %s\n", r.Verbs, r.Resources[0], group, scope, r.Why)
	}
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func (a Access) nodes() string {
	if a.Nodes == "" {
		return "pool"
	}
	return a.Nodes
}
