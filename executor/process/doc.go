// Package process is the executor's Runtime for one machine: every worker of a gang is a local
// process in its own process group, the trial's checkpoint directory is restored from the
// checkpoint.Store before the gang starts and saved to it after, and each trial's output goes to
// its own log file in the state directory.
//
// A worker's gang ends with its leader (the process the runtime started): once it has exited,
// whatever it left behind is ended too, so that a trainer's stray child can neither hold the
// gang "running" through an inherited stdout nor outlive the run. What it left behind is found
// in /proc (Linux) as the members of its process group, the processes carrying its token
// (TokenVar, which every descendant inherits with the environment: children that left the group
// or started a session of their own with setsid are found so) and the descendants of either.
// A descendant that both clears its environment and leaves the group escapes this, unless the
// runtime has a cgroup (Runtime.Cgroup, where cgroup v2 is writable) or a Sandbox, which Close
// ends whole; its inherited output pipe is closed WaitDelay after the leader's exit, and the
// leader's exit status stands.
// Idle reused workers and what any ended worker left behind are ended by Close.
//
// BecomeSubreaper, called once by a driver whose children are this runtime's workers, makes
// orphaned descendants of the workers children of the driver instead of init: a stray stays in
// the driver's tree (where its own children are found as its descendants) rather than leaving
// for init's, and the runtime reaps the strays it ends. One that exits by itself stays a zombie
// of the driver until the driver exits: only what the runtime can attribute to a worker is
// reaped, never another child of the driver's.
//
// Each gang's workers are recorded in WorkDir/<trial>/pids (0600, written atomically) with the
// identity of each process: its PID, its start time in clock ticks since boot and the boot ID,
// and its token. Reap, on resume or cancel, ends only processes whose identity matches: a PID
// alone may name any process by then (the worker ended and the number was reused, or the file
// was written by someone else), and a pids file without identity is not trusted.
package process
