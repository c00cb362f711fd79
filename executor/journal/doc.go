// Package journal is a run's journal: its events (Event, of a Kind), the append-only, fsynced
// file they are written to (Journal), read back whole (ReadJournal) or followed as a driver
// writes it (Tail), each record checksummed so that damage is told apart from a torn last
// write. Records of older drivers are upgraded to today's shape as they are decoded, so readers
// and the fold see one shape. It imports only leaf packages (clock, cloud, infra, planner, sim,
// spec); what the events mean for a run is package runstate's, which the engine and every
// reader share.
package journal
