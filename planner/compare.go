package planner

import (
	"context"
	"fmt"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Outcome is what one planner predicts for one experiment.
type Outcome struct {
	Feasible  bool       `json:"feasible"`
	Predicted Prediction `json:"predicted"`
	// SavingPct is how much cheaper than the static plan, when both are feasible.
	SavingPct *float64  `json:"saving_pct,omitempty"`
	Alloc     sim.Alloc `json:"-"`
	// ASHA is an ASHA job's GPU schedule (CompareASHA's asha outcomes).
	ASHA *sim.ASHAPlan `json:"asha_plan,omitempty"`
}

// Compare runs the named planners on one experiment, all on one simulator so that they compare
// on the same draws. A planner that finds no plan at all (nothing fits max_nodes) is left out.
// When ctx ends, planning stops within moments and Compare returns ctx's error. An ASHA job is
// compared by CompareASHA, whatever names says.
func Compare(ctx context.Context, exp *spec.Experiment, names []string) (map[string]Outcome, error) {
	if exp.Algorithm.IsASHA() {
		return CompareASHA(ctx, exp)
	}
	s, err := sim.For(exp)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	p, err := NewProblem(s, exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
	if err != nil {
		return nil, err
	}
	p.Stop = func() bool { return ctx.Err() != nil }
	out := map[string]Outcome{}
	for _, name := range names {
		res, err := Run(p, name)
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if res.Best.Alloc == nil {
			continue
		}
		pred, err := s.Simulate(res.Best.Alloc)
		if err != nil {
			return nil, err
		}
		out[name] = Outcome{Feasible: res.Feasible, Predicted: prediction(pred, exp.Deadline.Seconds()), Alloc: res.Best.Alloc}
	}
	if st, ok := out[spec.PlannerStatic]; ok && st.Feasible && st.Predicted.Cost.Mean > 0 {
		for name, o := range out {
			if o.Feasible && name != spec.PlannerStatic {
				saving := 100 * (1 - o.Predicted.Cost.Mean/st.Predicted.Cost.Mean)
				o.SavingPct = &saving
				out[name] = o
			}
		}
	}
	return out, nil
}
