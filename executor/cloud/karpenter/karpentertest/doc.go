// Package karpentertest plays Karpenter for tests against a control plane that runs none: it
// fulfils NodeClaims (after a start-up latency it registers a node and reports the NodeClaim
// launched, registered, initialised and ready), removes a NodeClaim's node when it is deleted,
// fails launches a test chooses, and reclaims a spot node as Karpenter's disruption does.
package karpentertest
