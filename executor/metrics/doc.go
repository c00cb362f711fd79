// Package metrics serves a run's state as Prometheus metrics (`run --metrics-addr`): nodes held
// by instance type and market, trials running, stages, retries, timeouts, lost nodes, spec time
// and cost so far against the prediction. It is fed the journal's events, the same record the
// run's state is built from (a resumed run replays its past into it), and the driver's progress.
package metrics
