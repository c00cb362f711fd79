package servers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
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
