// Package nomadpool is a cloud.Provider whose nodes are the existing clients of a team's Nomad
// cluster, selected by spec.NomadPool (node pool, datacenter, node class, meta). It never starts
// or stops an agent: "scaling" claims clients and releases them.
//
// Decisions a caller relies on:
//
//   - Matching: a client is a candidate when it matches every filter given, is ready and
//     eligible for scheduling, and has at least GPUsPerNode GPUs. Its GPU count is its meta
//     `gpus` when set, else the nvidia/gpu device instances it fingerprints, else GPUsPerNode.
//   - Claims: a claimed client is the Nomad Variable rubberband/claims/<Nomad node ID> (items
//     run, experiment, token, claimed_at, node, addr, gpus, instance_type), created with
//     check-and-set at index 0: Nomad lets exactly one writer create a path, so two drivers never
//     hold the same client. Release deletes the variable with check-and-set on the ModifyIndex
//     read just before, and only when the claim is this run's.
//   - State lives in Nomad, not on the driver's disk: a Provider opened with the same run ID
//     lists what another claimed. A claim whose client left the cluster or is down is not listed
//     and is deleted.
//   - Idempotency: a claim carries the request's Token; a request repeated under the same Token
//     gives back what the first one claimed and claims only the rest.
//   - Node.ID is the Nomad node ID (pin with ${node.unique.id}); RunningAt is the claim time,
//     where billing starts; the price is the configured internal rate.
//   - Capacity: when too few matching clients are free, Create returns those it claimed and a
//     *cloud.CapacityError saying how many matched, how many were free and how many were wanted.
//     A released client can be claimed again under its own ID: IDs of released nodes recur.
package nomadpool
