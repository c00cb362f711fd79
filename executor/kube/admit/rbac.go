package admit

import (
	"cmp"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Access is who the driver runs as and where.
type Access struct {
	// Namespace holds the run's pods and Secret; LeaseNamespace the pool's Leases (default
	// Namespace).
	Namespace, LeaseNamespace string
	// ServiceAccount is the driver's (the server's, or a CI job's).
	ServiceAccount string
	// Nodes is where nodes come from: spec.KubeNodesPool or spec.KubeNodesKarpenter.
	Nodes string
	// Name prefixes the objects made (default "rubberband").
	Name string
}

// Rule is one RBAC rule, with why the driver needs it (printed as a comment).
type Rule struct {
	rbacv1.PolicyRule
	// Cluster: the rule is on cluster-scoped resources or across namespaces (a ClusterRole's).
	Cluster bool
	// Leases: the rule is in the lease namespace.
	Leases bool
	Why    string
}

// Rules is every rule the driver needs for nodes from pool or karpenter, each the least that
// works: the backend's tests bind exactly these and see a run fail without each.
func Rules(nodes string) []Rule {
	rules := []Rule{
		{PolicyRule: rule("", "pods", "create", "get", "list", "watch", "delete"), Why: "launch each gang's pods, follow and stop them"},
		{PolicyRule: rule("", "pods/log", "get"), Why: "read the trainers' reports and logs"},
		{PolicyRule: rule("", "secrets", "create", "get", "update", "delete"), Why: "keep the checkpoint store's credentials in the run's Secret, never in a pod spec"},
		{PolicyRule: rule("", "resourcequotas", "list"), Why: "refuse a plan the namespace's quota cannot fit"},
		{PolicyRule: rule("", "nodes", "get", "list", "watch"), Cluster: true, Why: "place gangs on Ready nodes and see a node reclaimed (deleted, NotReady, tainted)"},
		{PolicyRule: rule("", "pods", "list"), Cluster: true, Why: "count the GPUs other namespaces' pods hold on a node"},
	}
	switch nodes {
	case "karpenter":
		rules = append(rules, Rule{PolicyRule: rule("karpenter.sh", "nodeclaims", "create", "get", "list", "watch", "delete"), Cluster: true,
			Why: "rent a node per NodeClaim and release it"})
	default:
		rules = append(rules, Rule{PolicyRule: rule("coordination.k8s.io", "leases", "create", "get", "list", "delete"), Leases: true,
			Why: "claim a pool node for one run at a time"})
	}
	return rules
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

// Objects are the ServiceAccount, the Roles, ClusterRole and their bindings that grant a.ServiceAccount the rules,
// less any rule drop names (by index into Rules; the tests' way to remove one), in the order
// they should be applied.
func Objects(a Access, drop ...int) []runtime.Object {
	name := a.Name
	if name == "" {
		name = "rubberband"
	}
	leaseNS := a.LeaseNamespace
	if leaseNS == "" {
		leaseNS = a.Namespace
	}
	var ns, leases, cluster []rbacv1.PolicyRule
	for i, r := range Rules(a.Nodes) {
		if contains(drop, i) {
			continue
		}
		switch {
		case r.Cluster:
			cluster = append(cluster, r.PolicyRule)
		case r.Leases && leaseNS != a.Namespace:
			leases = append(leases, r.PolicyRule)
		default:
			ns = append(ns, r.PolicyRule)
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: a.ServiceAccount, Namespace: a.Namespace}}
	objs := []runtime.Object{&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: a.ServiceAccount, Namespace: a.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "rubberband"}}}}
	role := func(namespace string, rules []rbacv1.PolicyRule) {
		if len(rules) == 0 {
			return
		}
		meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/name": "rubberband"}}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta, Rules: rules},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta,
				Subjects: subject, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}})
	}
	role(a.Namespace, ns)
	role(leaseNS, leases)
	if len(cluster) > 0 {
		// Cluster-wide objects are named after the namespace too: two teams' drivers each get
		// their own.
		meta := metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s", name, a.Namespace), Labels: map[string]string{"app.kubernetes.io/name": "rubberband"}}
		objs = append(objs,
			&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: meta, Rules: cluster},
			&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: meta,
				Subjects: subject, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: meta.Name}})
	}
	return objs
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// For is the access a run of exp needs, as `rubberband kube-rbac` prints it: the spec's
// namespaces and nodes (default namespace "default", nodes pool), then namespace and nodes when
// given (flags). Nodes other than pool and karpenter are an error.
func For(exp *spec.Experiment, serviceAccount, namespace, nodes string) (Access, error) {
	a := Access{Namespace: "default", ServiceAccount: serviceAccount, Nodes: spec.KubeNodesPool}
	if exp != nil && exp.Cluster.Kubernetes != nil {
		k := exp.Cluster.Kubernetes
		a.Nodes, a.LeaseNamespace = k.KubeNodes(), k.LeaseNamespace
		a.Namespace = cmp.Or(k.Namespace, a.Namespace)
	}
	a.Namespace = cmp.Or(namespace, a.Namespace)
	switch nodes {
	case "":
	case spec.KubeNodesPool, spec.KubeNodesKarpenter:
		a.Nodes = nodes
	default:
		return Access{}, fmt.Errorf("--nodes %q is neither %s nor %s", nodes, spec.KubeNodesPool, spec.KubeNodesKarpenter)
	}
	return a, nil
}

// List is objs as a Kubernetes List, for -o json (`kubectl apply -f` takes it).
func List(objs []runtime.Object) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
}
