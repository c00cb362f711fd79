// Package planner chooses how many GPUs each stage of a tuning job gets: the cheapest allocation
// whose predicted completion time meets the deadline at the chosen quantile. It holds the
// baselines (a static cluster; naive elasticity with a fixed GPU count per trial), the paper's
// greedy planner (Algorithm 2, warm-started from the best static cluster at 1x, 2x and 3x) and an
// exact branch-and-bound search over the same plan space. All of them are pure functions of the
// simulator's predictions, and all compare plans on the same Monte Carlo draws. Compare runs
// several planners on one experiment; Sweep does it at every point of a grid of experiments (what
// `rubberband whatif` shows), on every CPU.
package planner
