// Package runstate is what a run's journal says: the one fold of its events (State.Apply), which
// the engine applies as it journals and every reader replays, and the pure views built from it —
// Replay and Result (what a run realized, billed by sim/meter), Snapshot (its phase, launches,
// nodes, stage windows and counts), Compare (a plan's predictions beside a run's result),
// RealizedSchedule, Recost, VerifyASHA, the failure rule (BrokenTrainerError). A view needs the
// run's Plan (its spec and plan), its events and, for a run under way, a now: no driver, no
// executor configuration, no clock. It imports journal and the pure packages below it (spec,
// sim, planner, asha, search, trial), never the engine or anything that does I/O.
package runstate
