// Package admit is what a Kubernetes cluster must allow a run before it starts: the RBAC rules
// the driver needs, for `rubberband kube-rbac` to print and the backend's tests to bind, and the
// namespace's ResourceQuotas, which must fit the plan's peak before anything is rented. Pure:
// it reads objects it is given and makes objects it returns.
package admit
