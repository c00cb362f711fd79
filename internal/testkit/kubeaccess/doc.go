// Package kubeaccess runs a test as a ServiceAccount granted exactly some RBAC objects (the
// driver's, from executor/kube/admit), so that the code under test is shown to need no more.
package kubeaccess
