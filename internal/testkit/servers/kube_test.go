package servers

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rubberband-hpo/rubberband/executor/clock"
)

// The control plane serves the admin, enforces RBAC on a ServiceAccount's token, writes a
// kubeconfig that client-go loads, and serves Karpenter's NodeClaim CRD once installed.
func TestKube(t *testing.T) {
	k := StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := k.Namespace(t)
	if _, err := k.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin create: %v", err)
	}
	token, err := k.Token(ctx, ns, "default")
	if err != nil {
		t.Fatal(err)
	}
	path, err := k.Kubeconfig(t.TempDir(), k.As(token), ns)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a ServiceAccount bound to nothing read a ConfigMap: %v", err)
	}
	if err := k.InstallCRD(ctx, NodeClaimCRD(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Client.Discovery().ServerResourcesForGroupVersion("karpenter.sh/v1"); err != nil {
		t.Fatalf("NodeClaims not served: %v", err)
	}
}

// With the controllers, a Deployment gets its pod, and the scheduler binds it to a Ready node
// that fits it.
func TestKubeControllers(t *testing.T) {
	k := StartKube(t)
	k.StartControllers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns := k.Namespace(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-n", Labels: map[string]string{"pick": ns}}}
	node, err := k.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{Capacity: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("8Gi"), "pods": resource.MustParse("10")},
		Allocatable: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("8Gi"), "pods": resource.MustParse("10")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}}
	if node, err = k.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The not-ready taint admission puts on a new node, which the node lifecycle controller
	// would lift once it is Ready.
	node.Spec.Taints = nil
	if node, err = k.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	labels := map[string]string{"app": "x"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DeploymentSpec{Replicas: &one,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pick": ns}, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
	if _, err := k.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods *corev1.PodList
	if clock.Until(ctx, clock.Wall{}, 100*time.Millisecond, func() bool {
		pods, err = k.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Spec.NodeName == node.Name
	}) != nil {
		t.Fatalf("no pod of the Deployment bound to %s: %v %v", node.Name, pods, err)
	}
}
