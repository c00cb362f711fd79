// Package rundir owns a run's state directory and the root folder that holds runs. It reads
// them: the run's own copy of its spec and plan (run.json, spec.yaml, spec-files/, plan.json),
// its journal replayed into where the run stands (View: the one reading that `list`, `status`
// and the web dashboard share) and written as tables (WriteTable, WriteTrials), its learning
// curves, what its pictures show (Replayed.Pictures and SearchSummary.Found, which package
// charts draws: charts reads no run), its plan file (ReadPlanFile), and its logs (a tail,
// followed while the driver lives); and every run under a root, a row each (List, WriteList).
// What `status`, `report` and `best` print is rendered here once (RenderStatus,
// Replayed.WriteReport, WriteBest; StatusNow, Report and BestNow in one call, and WriteEnd for
// `run`): by the CLI for this machine's runs, and by a server for its
// own, which sends the CLI the bytes, so that both print the same. And it writes what is not
// the executor's: a new run's directory with the snapshot of the spec as it was parsed and the
// plan (Create), a changed spec (ChangeSpec), a cancel request; every file atomically and
// durably (WriteFile), readable by its owner alone (FileMode, DirMode). The names of what a
// state directory holds are its constants. The journal is the executor's.
package rundir
