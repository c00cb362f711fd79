// Package rundir reads a run's state directory and the root folder that holds runs: the run's
// own copy of its spec and plan (run.json, spec.yaml, spec-files/, plan.json), its journal
// replayed into where the run stands (View: the one reading that `list`, `status` and the web
// dashboard share), its learning curves, and the tails of its trials' logs. It only reads: the
// driver (executor) writes.
package rundir
