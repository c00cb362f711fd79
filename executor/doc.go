// Package executor is the engine that runs a plan for real (paper §5): per stage it scales the
// cluster through a cloud.Provider, places each trial's gang with package placement, launches it
// through a gang.Runtime (local processes, Nomad jobs), collects the trainer's reports, promotes
// the best trials at each sync and releases the nodes the next stage does not need. It journals
// every decision and result before acting on it (package journal; run.record is its one writer),
// applying each to the run's state (package runstate's one fold), so that a driver that died
// can be resumed (by one driver at a time: rundir.LockDir) and every reader sees what it saw.
// Readers never import it: what a run realized, its snapshot, its comparison with the plan and
// its realized schedule are runstate's views of the journal. It imports journal, runstate, gang,
// cloud, clock and the pure packages (spec, sim, planner, placement, asha, search, trial).
package executor
