package planner

import (
	"context"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// PlanRun plans exp for a run, as `rubberband run` and a server's submission both do: an ASHA
// job's GPU schedule (PlanASHA), else the spec's planner's allocation (Plan; progress, when not
// nil, hears how many plans it has simulated). A plan that misses the spec's deadline at its
// quantile (Check) or its budget (CheckBudget) is an error matching ErrInfeasible.
func PlanRun(ctx context.Context, exp *spec.Experiment, s *sim.Simulator, progress func(evaluated int)) (*Report, error) {
	var rep *Report
	if exp.Algorithm.IsASHA() {
		res, err := PlanASHA(ctx, exp, s.Model())
		if err != nil {
			return nil, err
		}
		if err := res.Check(exp); err != nil {
			return nil, err
		}
		rep = res.Report(exp)
	} else {
		r, res, err := Plan(ctx, exp, s, progress)
		if err != nil {
			return nil, err
		}
		if err := res.Check(exp); err != nil {
			return nil, err
		}
		rep = r
	}
	if err := CheckBudget(exp, rep); err != nil {
		return nil, err
	}
	return rep, nil
}
