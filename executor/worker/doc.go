// Package worker is the remote half of the Runtime contract: what a remote runtime (Nomad's
// raw_exec or docker task) runs on a node for one worker of a gang, as `rubberband worker`. It
// restores the trial's checkpoint from the store its environment names (checkpoint/open), runs
// the trainer under the trainer contract, relays its reports stamped with when they were
// printed, stops it on SIGTERM, on the runtime's abort signal, past the launch's deadline, when
// the driver's heartbeat is gone or when the node's spot interruption notice comes, and saves
// what rank 0 reached. Run returns the exit code the runtime reads (ExitWatchdog,
// ExitInterrupted, the trainer's own); Options.Args and ParseArgs are the command line between
// the runtime that writes it and the worker that reads it.
package worker
