// Package karpenter is a cloud.Provider that rents elastic nodes through Karpenter's NodeClaim
// API (karpenter.sh/v1, cluster-scoped), one NodeClaim per node, through the dynamic client (so
// the project does not depend on Karpenter's Go module). Karpenter launches a machine for each
// NodeClaim, and deleting the NodeClaim terminates the machine.
//
// Decisions a caller relies on:
//
//   - A NodeClaim's name is derived from the run ID, the request's Token and the node's index
//     (rb-<digest>-<i>): a request repeated under its Token creates nothing new, and waits for
//     (or gives back) what the first one created. Labels rubberband.dev/run and
//     rubberband.dev/token say whose it is; its requirements are the request's instance type
//     (node.kubernetes.io/instance-type In) and market (karpenter.sh/capacity-type In), its
//     resources.requests nvidia.com/gpu the GPUs per node, its nodeClassRef the configured one.
//   - Create waits until every NodeClaim names a Ready Node in status.nodeName and reports
//     Initialized True. A NodeClaim that reports Launched False, or vanishes (Karpenter deletes
//     one it cannot launch), is a launch failure: Create deletes every NodeClaim not up and
//     returns the nodes up with a *cloud.CapacityError. When ctx ends it does the same and
//     returns ctx's error.
//   - Node.ID is the node's name; Addr its InternalIP; RunningAt the Launched condition's time
//     (billing starts when the machine is launched); the price is the configured offer's.
//   - Delete deletes the NodeClaims whose nodes are named (unknown names are not an error); List
//     is this run's NodeClaims, not being deleted, whose node exists. A spot reclaim (Karpenter
//     deletes the NodeClaim) drops the node from List.
package karpenter
