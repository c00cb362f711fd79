package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
)

// comparePoints is how many budgets a comparison reports each sampler's regret at.
const comparePoints = 96

// Measure is one case of `rubberband search-bench`: every sampler over seeds seeds (RunAll; its
// progress a line on log, redrawn), Optuna's trajectories beside them when optuna is not nil,
// compared at equal budgets (Compare). It returns the comparison and the trajectories it was
// made from (what Regret draws).
func Measure(ctx context.Context, c Case, samplers []string, seeds int, optuna *OptunaSource, log io.Writer) (Result, []Trajectory, error) {
	p, trajs, err := RunAll(ctx, c, samplers, seeds, func(done, total int) {
		fmt.Fprintf(log, "\r%s: %d of %d runs", c, done, total)
	})
	fmt.Fprintln(log)
	if err != nil {
		return Result{}, nil, err
	}
	if optuna != nil {
		more, err := optuna.Trajectories(ctx, c.Objective, p.Iters, log)
		if err != nil {
			return Result{}, nil, err
		}
		trajs = append(trajs, more...)
	}
	r := Compare(c.String(), p.Iters, seeds, trajs, comparePoints)
	if o, _ := objective.Lookup(c.Objective); o.Multi != nil {
		r.MaxHypervolume = o.Multi.MaxHypervolume
	}
	return r, trajs, nil
}
