// Package sim predicts what an allocation plan costs and how long it takes, by the model of the
// RubberBand paper (§4.1-§4.2): a DAG of SCALE, INIT_INSTANCE, DATA, TRAIN and SYNC nodes per
// stage, latencies drawn from distributions, the critical path of each sampled DAG (Algorithm 1)
// as the job completion time, and per-instance or per-function billing on top. Billing is
// package meter's, which the executor uses too: Simulate lays each sample out as node spans,
// launch spans and stage windows and has the meter split its cost among stages, so that a
// prediction and a run are split by one rule; the planners' inner loop keeps only the total.
//
// Everything is pure and seeded: the same model, plan, sample count and seed give the same
// numbers on any machine. Samples are drawn per stage and per allocation from their own seeded
// streams (common random numbers), so two plans that share a stage allocation share its samples,
// and a planner comparing plans compares them on the same draws.
package sim
