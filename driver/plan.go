package driver

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rubberband-hpo/rubberband/internal/charts"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Predicted is what `plan` and `simulate` print (JSON under -o json, else Table), and what they
// exit with after printing it (Check: a plan that misses the deadline or the budget, exit 3).
type Predicted struct {
	JSON  any
	Table func(io.Writer)
	Check error
}

// PlanJob plans exp (planner.Plan; an ASHA job's GPU schedule beside the best fixed-slot ASHA
// and synchronous SHA, planner.PlanASHA), draws its schedule to gantt and writes a feasible plan
// to out (for `run --plan` and `simulate --plan`), either "" for none. progress is the
// planner's, unused for ASHA.
func PlanJob(ctx context.Context, exp *spec.Experiment, s *sim.Simulator, gantt, out string, progress func(evaluated int)) (*Predicted, error) {
	if exp.Algorithm.IsASHA() {
		return planASHA(ctx, exp, s.Model(), gantt, out)
	}
	rep, res, err := planner.Plan(ctx, exp, s, progress)
	if err != nil {
		return nil, err
	}
	if gantt != "" {
		if err := charts.PlanSchedule(gantt, s, res.Best.Alloc, fmt.Sprintf("%s: %s plan, one sampled run", exp.Name, exp.Planner.Name)); err != nil {
			return nil, err
		}
	}
	if out != "" && res.Feasible {
		if err := writePlanFile(out, rep); err != nil {
			return nil, err
		}
	}
	check := res.Check(exp)
	if check == nil {
		check = planner.CheckBudget(exp, rep)
	}
	return &Predicted{JSON: rep, Table: rep.WriteTable, Check: check}, nil
}

func planASHA(ctx context.Context, exp *spec.Experiment, m *sim.Model, gantt, out string) (*Predicted, error) {
	res, err := planner.PlanASHA(ctx, exp, m)
	if err != nil {
		return nil, err
	}
	if gantt != "" {
		sc, err := m.ScheduleASHA(*exp.Algorithm.ASHA, res.Elastic.Plan, uint64(exp.Seed))
		if err != nil {
			return nil, err
		}
		if err := charts.Schedule(gantt, fmt.Sprintf("%s: asha schedule %s GPUs, one sampled run", exp.Name, res.Elastic.Plan), sc, func(sp sim.Span) int { return sp.Trial }); err != nil {
			return nil, err
		}
	}
	if out != "" && res.Elastic.Feasible {
		if err := writePlanFile(out, res.Report(exp)); err != nil {
			return nil, err
		}
	}
	return &Predicted{JSON: res, Table: res.WriteTable, Check: res.Check(exp)}, nil
}

// writePlanFile writes a plan file (`plan --out`), as rundir.ReadPlanFile reads it.
func writePlanFile(path string, rep *planner.Report) error {
	data, err := planner.EncodeReport(rep)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}

// Simulate predicts the time and cost of the allocation given: a plan file's when fromPlan (the
// planner that made it named), else a list (sim.ParseAlloc). It draws one sampled run's
// schedule to gantt and the predictions' histograms to hist ("" for none). A plan or list that
// does not fit the job matches ErrInput.
func Simulate(exp *spec.Experiment, s *sim.Simulator, fromPlan bool, given, gantt, hist string) (*Predicted, error) {
	a, name, err := givenAlloc(s, fromPlan, given)
	if err != nil {
		return nil, err
	}
	if err := s.Model().Check(s.Brackets(), a); err != nil {
		return nil, inputErr("%v", err)
	}
	res, err := s.Simulate(a)
	if err != nil {
		return nil, err
	}
	deadline := exp.Deadline.Seconds()
	feasible := deadline == 0 || sim.Quantile(res.Outcome.JCT, exp.Planner.DeadlineQuantile) <= deadline
	if gantt != "" {
		if err := charts.PlanSchedule(gantt, s, a, exp.Name+": cluster schedule, one sampled run"); err != nil {
			return nil, err
		}
	}
	if hist != "" {
		if err := charts.Predictions(hist, res, deadline, exp.Name); err != nil {
			return nil, err
		}
	}
	rep := planner.NewReport(exp, name, deadline, feasible, res)
	return &Predicted{JSON: rep, Table: rep.WriteTable, Check: planner.CheckOutcome(exp, res.Outcome)}, nil
}

// givenAlloc is Simulate's allocation and the name of the planner that made it.
func givenAlloc(s *sim.Simulator, fromPlan bool, given string) (sim.Alloc, string, error) {
	if !fromPlan {
		a, err := sim.ParseAlloc(s.Model(), given)
		if err != nil {
			return nil, "", inputErr("--alloc: %v", err)
		}
		return a, "given", nil
	}
	rep, err := rundir.ReadPlanFile(given)
	if err != nil {
		return nil, "", inputErr("%v", err)
	}
	a, err := rep.Alloc(s.Brackets())
	if err != nil {
		return nil, "", inputErr("%s: %v", given, err)
	}
	return a, rep.Planner, nil
}
