// Package driver is what `rubberband run`, `resume` and `cancel` do beyond their flags and
// output, and what the dashboard's cancel button does: it opens a run's backend (Open: the
// provider that rents its nodes, the runtime that launches its gangs, and what stops both, from
// the run's state; Check says first why a backend cannot run a spec), locks the run's state
// directory (Lock), runs or resumes the run with its journal through the executor (Execute),
// writing the driver log (Log) and serving its metrics, and cancels a run (Cancel: a live
// driver is signalled and waited for, a stale run's gangs are reaped and its nodes released
// here). Every backend is one row of one registry (Kinds): its name, help, capabilities, checks and
// set-up; callers ask a Kind, never compare a backend's name. Errors a user must fix match ErrInput.
package driver
