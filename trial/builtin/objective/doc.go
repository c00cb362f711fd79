// Package objective holds multi-fidelity benchmarks for measuring how good a search is: the
// synthetic trainer reports them (RB_SYNTH_OBJECTIVE), in a local or a virtual run, and
// `rubberband search-bench` runs samplers against them. Each is a loss (lower is better) of a
// configuration after iter of maxIter iterations. Three are functions with a known optimum (at
// iter = maxIter the function itself, whose minimum is Optimum), which
// scripts/optuna_bench.py computes too for Optuna; digits is a network really trained (the
// built-in MLP), which the script asks `rubberband search-bench objective` for.
//
// It sits beside the built-in trainers it is measured with (the synthetic trainer reports it;
// digits trains package mlp) and imports only spec and trial/builtin/mlp: the library's search
// and the executor's virtual backend import it, never the other way round.
package objective
