package kubeaccess

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	if _, err := k.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service account %s: %v", sa, err)
	}
	rbac := k.Client.RbacV1()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, err = rbac.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = rbac.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("not an RBAC object: %T", obj)
		}
		if err != nil {
			t.Fatalf("bind %s: %v", sa, err)
		}
	}
	token, err := k.Token(ctx, ns, sa)
	if err != nil {
		t.Fatal(err)
	}
	return k.As(token)
}
