// Package bench measures how good a sampler's search is: it runs a job whose synthetic trainer
// reports a benchmark objective of package objective (a known optimum) in virtual time, through
// the unchanged executor, for several samplers and seeds, and turns each run's journal into a
// trajectory of regret (the incumbent's true loss above the optimum) against the iterations and
// the GPU dollars spent so far. Optuna's trajectories (scripts/optuna_bench.py) are read in the
// same form and compared at equal iterations (Measure: one case, all of it; Suite: the command's
// objectives in turn); Regret draws them.
//
// It is the code of `rubberband search-bench`, not of the library: it stands above the engine
// (it runs executor/virtual's world) beside driver, and nothing but cmd imports it.
package bench
