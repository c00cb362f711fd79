// Package pareto ranks results of several objectives: Pareto dominance, non-dominated fronts,
// crowding distance, the total order multi-objective promotion follows (feasible first, then
// front, then crowding: NSGA-II's rule with Deb's constraint handling, as MO-ASHA promotes), and
// the dominated hypervolume that benchmarks measure fronts by. Every objective is a loss (lower
// is better); NaN ranks as +Inf. Pure: no I/O, no randomness.
package pareto
