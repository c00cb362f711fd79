// Package driver is what `rubberband run`, `resume`, `cancel`, `profile`, `cleanup`, `plan`,
// `simulate`, `prices` and `catalog refresh` do beyond their flags and output, and what a server's submission and the dashboard's cancel button do:
// it makes a run (Create: the one way, for the CLI and a server alike), opens a run's backend
// (Open: the provider that rents its nodes, the runtime that launches its gangs, and what stops
// both, from the run's state; Check says first why a backend cannot run a spec), locks the run's
// state directory (Lock), runs or resumes the run with its journal through the executor
// (Execute), writing the driver log (Log) and serving its metrics, and cancels a run (Cancel: a
// live driver is signalled and waited for, a stale run's gangs are reaped and its nodes released
// here); it measures a trainer's profile (Profile), ends what EC2 runs left behind (Cleanup),
// plans and simulates a job with its pictures and plan file (PlanJob, Simulate) and refreshes the
// local catalog from AWS (RefreshCatalog). StartRun and ResumeRun are `run` and `resume` beyond
// their flags: the state directory made and locked, the checks, the plan read or made, Create,
// and Execute under SIGINT and SIGTERM. ExitCode gives an error the CLI's exit code. Every
// backend is one row of one registry (Kinds): its name, help, capabilities, checks and set-up;
// callers ask a Kind, never compare a backend's name. Errors a user must fix match ErrInput.
package driver
