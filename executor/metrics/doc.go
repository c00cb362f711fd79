// Package metrics serves a run's state as Prometheus metrics (`run --metrics-addr`): nodes held
// by instance type and market, trials running, stages, retries, timeouts, lost nodes, spec time
// and cost so far against the prediction. It reads the run's snapshot (runstate.Snapshot, the
// one fold of its journal) when it is scraped, and the driver's progress for time and cost: it
// keeps no count of its own.
package metrics
