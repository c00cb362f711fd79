// Package kubepool is a cloud.Provider whose nodes are a team's existing Kubernetes nodes,
// chosen by a label selector (spec cluster.kubernetes.node_selector). It never adds or removes a
// node: "scaling" claims nodes and releases them, as nomadpool does for Nomad clients.
//
// Decisions a caller relies on:
//
//   - Matching: a node is a candidate when it carries the selector's labels, the request's
//     instance type (label node.kubernetes.io/instance-type) and market (see Market), is Ready,
//     not cordoned, not tainted NoSchedule or NoExecute (a nvidia.com/gpu taint is tolerated:
//     the trainers' pods tolerate it), has an InternalIP, and has at least GPUsPerNode
//     allocatable nvidia.com/gpu free of the requests of other runs' non-terminated pods (pods
//     labelled rubberband.dev/run with this run's ID are its own and do not make a node busy).
//   - Claims: a claimed node is the coordination.k8s.io/v1 Lease rb-node-<node> in the lease
//     namespace, holderIdentity the run's ID, labels rubberband.dev/run and rubberband.dev/token
//     (annotations keep the whole token, the node name and its GPUs).
//     The API server lets exactly one writer create a name, so two runs never hold one node; a
//     create refused with AlreadyExists is another's claim and is skipped. Release deletes the
//     Lease with preconditions on the UID and resourceVersion just read, and only the holder's.
//   - State lives in the API server: a Provider opened with the same run ID lists what another
//     claimed. A Lease whose node is gone is not listed and is deleted.
//   - Idempotency: a Lease carries the request's Token; a request repeated under the same Token
//     gives back what the first one claimed and claims only the rest.
//   - Node.ID is the node name; Addr its InternalIP; GPUs its allocatable nvidia.com/gpu less
//     other runs' requests when claimed (annotation rubberband.dev/gpus of the Lease);
//     RunningAt the claim (the Lease's acquireTime), where billing starts; the market is read from
//     the node's capacity-type label (Market) and priced at the configured on-demand or spot rate.
//   - Capacity: when too few nodes are free, Create returns those it claimed and a
//     *cloud.CapacityError saying how many matched, how many were free, and why the others were
//     left out (not ready, cordoned, tainted, busy, held by another run). A released node can be
//     claimed again under its own name: IDs of released nodes recur.
package kubepool
