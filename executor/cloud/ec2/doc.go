// Package ec2 is a cloud.Provider that rents EC2 instances through aws-sdk-go-v2: one instance
// per node, on-demand or one-time spot, tagged with the experiment, the run and the node, and
// found again by those tags. It owns the choice of where to rent (the spec's subnets in order,
// then on-demand when spot runs out and the spec allows it), the idempotency tokens that keep a
// resumed driver from renting twice, the wait until a node runs and is ready, and the release
// of anything a failed or cancelled Create started. Credentials and the endpoint come from the
// SDK's own configuration chain, never from the spec; tests point it at internal/testkit/ec2sim.
//
// Decisions a caller relies on:
//
//   - Types: it rents the Config's own instance type and every kind of Config.More, a request
//     naming the one it wants (none: the Config's own). Each node reports its kind's GPUs and the
//     price of the market it was actually rented on; a type not among the kinds is a
//     *cloud.CapacityError. List takes type and market from EC2, GPUs and price from the kinds,
//     or from the instance's tags (rubberband:gpus, rubberband:price-per-hour) for a type the
//     provider no longer rents.
//   - Billing: a node returned by Create has RunningAt = the provider's clock when it sent the
//     DescribeInstances that first saw the instance running (EC2 bills from running; the
//     instance started running at most one poll interval earlier). For an instance it did not
//     see start (List; a repeated request whose instance already ran) it gives LaunchTime,
//     earlier than running by the boot time: such a node is overbilled a little, never
//     underbilled.
//   - Pending instances of the run are listed (a resumed driver must find what a dead one
//     rented) with RunningAt zero: they have not started billing.
//   - Idempotency: every node's RunInstances carries ClientToken = run ID, the request's Token
//     and the node's index (hashed past EC2's 64 characters). Repeating a request with the same
//     Token gives back the instances the first one rented, wherever they landed; the node name
//     (tag rubberband:node) is derived from the same token, so a replay sends the same request.
//   - Capacity errors (InsufficientInstanceCapacity, SpotMaxPriceTooLow, Unsupported, ...) are
//     not retried in place: the next subnet is the better retry. When every subnet failed, spot
//     falls back to on-demand if the spec allows it, else Create returns a *cloud.CapacityError.
//   - VcpuLimitExceeded is not a CapacityError: a caller that waits for capacity would wait for
//     ever on a quota only a person can raise. Create stops at once with an error naming the
//     quota code.
//   - Network: CreateGroup makes the run's own security group (tagged with the experiment and
//     the run, named after the run so that a resumed driver finds it): the run's instances may
//     reach each other on any port, the driver Nomad's ports (4646-4648), nobody else anything.
//     Every instance joins it beside the spec's groups. DeleteGroup deletes it once the run's
//     instances are gone, waiting (bounded) while they shut down, since EC2 refuses to delete
//     a group an instance still holds; one that live instances use is kept, a *GroupInUseError.
//   - Credentials: the driver's come from the SDK's chain and never reach an instance; with
//     cluster.ec2.instance_profile, instances (and containers, one more hop from IMDSv2) use
//     the profile's role.
//
// Outside a run: Prices looks up on-demand (Price List API) and spot (spot price history)
// prices, falling back to the built-in catalog, never silently; Cleanup terminates what
// rubberband rented for an experiment, or all of it, and CleanupGroups deletes the runs'
// security groups, touching nothing without rubberband's tags; Policy writes the
// least-privilege IAM policy of the driver, or of the instances' role, for what this package
// and the checkpoint store call.
package ec2
