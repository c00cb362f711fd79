// Package executor runs a plan for real (paper §5): per stage it scales the cluster through a
// cloud.Provider, places each trial's gang with package placement, launches it through a Runtime
// (local processes, Nomad jobs), collects the trainer's reports, promotes the best trials at each
// sync and releases the nodes the next stage does not need. It journals every decision and
// result, so that a driver that died can be resumed (by one driver at a time: rundir.LockDir), and
// meters the cost of the nodes it holds with the simulator's billing rules, so that realized and
// predicted runs compare line by line: Compare joins a plan's per-stage predictions with a run's
// result, and RealizedSchedule lays a journal out on nodes as the simulator lays out a sampled run.
package executor
