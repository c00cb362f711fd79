package spec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The kubernetes block decodes with its lines; each wrong name or missing piece is one problem
// at its path.
func TestKubernetesBlock(t *testing.T) {
	src := withField("cluster:\n  gpus_per_node: 4\n  price_per_hour: 2\n  kubernetes:\n    namespace: ml-team\n    node_selector: {rubberband.dev/pool: gpu, tier: a100}\n    lease_namespace: rb-leases\n    service_account: trainer\n    trainer_secret: wandb")
	exp, err := Parse("a.yaml", []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &Kubernetes{Namespace: "ml-team", NodeSelector: map[string]string{"rubberband.dev/pool": "gpu", "tier": "a100"},
		LeaseNamespace: "rb-leases", ServiceAccount: "trainer", TrainerSecret: "wandb"}
	if !reflect.DeepEqual(exp.Cluster.Kubernetes, want) || exp.Line("cluster.kubernetes.node_selector") != 9 || exp.Cluster.Kubernetes.KubeNodes() != KubeNodesPool {
		t.Fatalf("decoded %+v, node_selector on line %d", exp.Cluster.Kubernetes, exp.Line("cluster.kubernetes.node_selector"))
	}
	kube := func(block string) string {
		return "cluster: {gpus_per_node: 4, price_per_hour: 2, kubernetes: " + block + "}"
	}
	selector := func(n int) string {
		var kv []string
		for i := range n {
			kv = append(kv, fmt.Sprintf("k%d: v", i))
		}
		return "{node_selector: {" + strings.Join(kv, ", ") + "}}"
	}
	const class = "node_class: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}"
	for _, tc := range []struct{ line, path, msg string }{
		{kube("{node_selector: {pool: gpu}}"), "", ""},
		{kube("{nodes: karpenter, " + class + "}"), "", ""},
		{kube("{nodes: karpenter, namespace: ml, " + class + ", service_account: sa-1}"), "", ""},
		{kube(selector(MaxKubeSelector)), "", ""},
		{kube("{node_selector: {example.com/pool: ''}}"), "", ""},
		{kube("{}"), "cluster.kubernetes.node_selector", "at least one label"},
		{kube("{namespace: ML, node_selector: {a: b}}"), "cluster.kubernetes.namespace", "not a Kubernetes name"},
		{kube("{trainer_secret: a_b, node_selector: {a: b}}"), "cluster.kubernetes.trainer_secret", "not a Kubernetes name"},
		{kube("{nodes: fargate, node_selector: {a: b}}"), "cluster.kubernetes.nodes", "not pool or karpenter"},
		{kube("{nodes: karpenter}"), "cluster.kubernetes.node_class", "is needed with nodes: karpenter"},
		{kube("{node_selector: {a: b}, " + class + "}"), "cluster.kubernetes.node_class", "is for nodes: karpenter"},
		{kube("{nodes: karpenter, node_class: {group: karpenter.k8s.aws, kind: ec2, name: default}}"), "cluster.kubernetes.node_class.kind", "not a kind"},
		{kube("{nodes: karpenter, node_class: {group: karpenter.k8s.aws, kind: EC2NodeClass}}"), "cluster.kubernetes.node_class.name", "is needed"},
		{kube("{node_selector: {'a b': x}}"), "cluster.kubernetes.node_selector.a b", "not a label key"},
		{kube("{node_selector: {a: 'x y'}}"), "cluster.kubernetes.node_selector.a", "not a label value"},
		{kube(selector(MaxKubeSelector + 1)), "cluster.kubernetes.node_selector", "at most 32"},
		{kube("{node_selector: {a: b}, pool: x}"), "cluster.kubernetes.pool", "unknown field"},
	} {
		_, err := Parse("a.yaml", []byte(withField(tc.line)), nil)
		probs := problems(t, err)
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: refused:\n%.500v", tc.line, err)
		case tc.path != "" && (len(probs) != 1 || probs[0].Path != tc.path || probs[0].Line != 4 || !strings.Contains(probs[0].Msg, tc.msg)):
			t.Errorf("%s: want one problem at line 4, %s: ...%s..., got\n%.500v", tc.line, tc.path, tc.msg, err)
		}
	}
}
