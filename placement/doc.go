// Package placement maps each trial's GPU count onto nodes (the RubberBand paper's Algorithm 3):
// locality first (a trial that fits on one node gets one node; larger trials get whole nodes), a
// trial stays where it is when its allocation did not change, larger trials displace smaller ones
// to fit, a gang is placed whole or not at all (tentative assignment in a statement, then commit
// or discard), and before a scale-down the least used nodes are the ones released. It is pure.
package placement
