package spec

import (
	"regexp"
	"strings"
)

// Kubernetes says where a run's nodes and pods are on a Kubernetes cluster (--backend kube): the
// namespace, and where nodes come from, a team's existing nodes (a node pool chosen by labels) or
// Karpenter's NodeClaims.
type Kubernetes struct {
	// Namespace holds the run's pods, its Secret and (by default) its node Leases; default: the
	// kubeconfig context's namespace, or the server pod's own.
	Namespace string `yaml:"namespace"`
	// Nodes is where nodes come from: pool (the default: existing nodes that NodeSelector
	// chooses, claimed one run at a time) or karpenter (a NodeClaim per node, deleted on release).
	Nodes string `yaml:"nodes"`
	// NodeSelector holds the labels a node of the pool must carry.
	NodeSelector map[string]string `yaml:"node_selector"`
	// LeaseNamespace holds the Leases by which runs claim nodes of the pool: runs that share a
	// pool must share it (default: Namespace).
	LeaseNamespace string `yaml:"lease_namespace"`
	// NodeClass is the NodeClaims' nodeClassRef: the cloud's node class (karpenter).
	NodeClass *NodeClassRef `yaml:"node_class"`
	// ServiceAccount is what the trainers' pods run as (default: default).
	ServiceAccount string `yaml:"service_account"`
	// Image is the image a command trainer's pods run: it holds rubberband at /rubberband and
	// what the trainer needs. Empty: the pods run this driver's own rubberband path, for nodes
	// that share its files (the tests' node agent). An image trainer's pods run trainer.image.
	Image string `yaml:"image"`
	// TrainerSecret names a Secret of the namespace whose keys reach the trainer as environment
	// variables; its values never enter a pod spec.
	TrainerSecret string `yaml:"trainer_secret"`
}

// NodeClassRef names a Karpenter node class, such as EC2NodeClass default in karpenter.k8s.aws.
type NodeClassRef struct {
	Group string `yaml:"group"`
	Kind  string `yaml:"kind"`
	Name  string `yaml:"name"`
}

// Where a Kubernetes run's nodes come from.
const (
	KubeNodesPool      = "pool"
	KubeNodesKarpenter = "karpenter"
)

// MaxKubeSelector bounds the node selector's labels; MaxKubeImage an image reference.
const (
	MaxKubeSelector = 32
	MaxKubeImage    = 512
)

var (
	// dns1123LabelRE is a namespace's, a Secret's or a ServiceAccount's name at most (DNS-1123
	// label; subdomains are longer but these fit).
	dns1123LabelRE = lazyRegexp(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// labelKeyRE is a label key: an optional DNS prefix and a name.
	labelKeyRE = lazyRegexp(`^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	// labelValueRE is a label value (may be empty).
	labelValueRE = lazyRegexp(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	// kubeKindRE is a Kubernetes kind; kubeGroupRE an API group.
	kubeKindRE  = lazyRegexp(`^[A-Z][A-Za-z0-9]{0,62}$`)
	kubeGroupRE = lazyRegexp(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
)

// KubeNodes is where nodes come from, default pool.
func (k *Kubernetes) KubeNodes() string {
	if k == nil || k.Nodes == "" {
		return KubeNodesPool
	}
	return k.Nodes
}

func (v *validator) kubernetes() {
	k := v.e.Cluster.Kubernetes
	if k == nil {
		return
	}
	for _, f := range []struct{ field, value string }{{"namespace", k.Namespace}, {"lease_namespace", k.LeaseNamespace},
		{"service_account", k.ServiceAccount}, {"trainer_secret", k.TrainerSecret}} {
		if f.value != "" && !dns1123LabelRE().MatchString(f.value) {
			v.add("cluster.kubernetes."+f.field, "%q is not a Kubernetes name (lowercase letters, digits and '-', at most 63)", f.value)
		}
	}
	if len(k.Image) > MaxKubeImage || strings.ContainsAny(k.Image, " \t\n") {
		v.add("cluster.kubernetes.image", "is not an image reference (no spaces, at most %d characters)", MaxKubeImage)
	}
	switch k.KubeNodes() {
	case KubeNodesPool:
		if len(k.NodeSelector) == 0 {
			v.add("cluster.kubernetes.node_selector", "needs at least one label: without one every node of the cluster would do")
		}
		if k.NodeClass != nil {
			v.add("cluster.kubernetes.node_class", "is for nodes: karpenter; a pool's nodes exist already")
		}
	case KubeNodesKarpenter:
		if k.NodeClass == nil {
			v.add("cluster.kubernetes.node_class", "is needed with nodes: karpenter (the NodeClaims' nodeClassRef, such as {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default})")
		} else {
			for _, f := range []struct {
				field, value, what string
				re                 func() *regexp.Regexp
			}{{"group", k.NodeClass.Group, "an API group", kubeGroupRE}, {"kind", k.NodeClass.Kind, "a kind (such as EC2NodeClass)", kubeKindRE},
				{"name", k.NodeClass.Name, "a Kubernetes name", dns1123LabelRE}} {
				switch {
				case f.value == "":
					v.add("cluster.kubernetes.node_class."+f.field, "is needed")
				case !f.re().MatchString(f.value):
					v.add("cluster.kubernetes.node_class."+f.field, "%q is not %s", f.value, f.what)
				}
			}
		}
	default:
		v.add("cluster.kubernetes.nodes", "%q is not pool or karpenter", k.Nodes)
	}
	if len(k.NodeSelector) > MaxKubeSelector {
		v.add("cluster.kubernetes.node_selector", "holds %d labels (at most %d)", len(k.NodeSelector), MaxKubeSelector)
		return
	}
	for _, key := range sortedKeys(k.NodeSelector) {
		switch {
		case !labelKeyRE().MatchString(key):
			v.add("cluster.kubernetes.node_selector."+key, "not a label key")
		case !labelValueRE().MatchString(k.NodeSelector[key]):
			v.add("cluster.kubernetes.node_selector."+key, "%q is not a label value (at most 63 letters, digits, '-', '_' or '.')", k.NodeSelector[key])
		}
	}
}
