package kubeaccess

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/rubberband-hpo/rubberband/internal/testkit/servers"
)

// Bind creates the ServiceAccount sa in namespace ns, creates the Roles, ClusterRoles and their
// bindings in objs with the admin, and returns a client configuration that authenticates as sa.
// Cluster-scoped objects are left behind (the control plane dies with the test package).
func Bind(t testing.TB, k *servers.Kube, ns, sa string, objs []runtime.Object) *rest.Config {
	t.Helper()
	ctx := context.Background()
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}
	if err := k.Apply(ctx, append([]runtime.Object{account}, objs...)); err != nil {
		t.Fatalf("bind %s: %v", sa, err)
	}
	token, err := k.Token(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	return k.As(token)
}
