package planner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Errors of Plan and of the checks of a plan, for a caller to tell apart (the CLI's exit codes).
var (
	// ErrNoPlan: no allocation fits the cluster's max_nodes at all.
	ErrNoPlan = errors.New("no plan fits")
	// ErrInfeasible: the plan misses the deadline at the spec's quantile, or its predicted mean
	// cost is over the budget (DeadlineError, BudgetError).
	ErrInfeasible = errors.New("no plan meets the deadline and the budget")
)

// ProblemError is a job that cannot be planned as it is given (too big, no deadline): the
// user's to change.
type ProblemError struct{ Err error }

func (e *ProblemError) Error() string { return e.Err.Error() }
func (e *ProblemError) Unwrap() error { return e.Err }

// Plan is the planning use case, what `rubberband plan` and `run` print and the dashboard's plan
// page shows: the spec's planner on s, and its plan's prediction beside the cheapest static
// cluster's and the best plan on each subset of the spec's instance types and markets. progress,
// when not nil, is told how many plans the spec's planner has simulated, after each one (from
// the planner's goroutine: keep it cheap). Planning stops with ctx's error once ctx ends. A
// plan that misses the deadline is returned (res.Feasible false, Check's DeadlineError); no
// plan at all is an error matching ErrNoPlan.
func Plan(ctx context.Context, exp *spec.Experiment, s *sim.Simulator, progress func(evaluated int)) (*Report, *Result, error) {
	prob, err := NewProblem(s, exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
	if err != nil {
		return nil, nil, &ProblemError{err}
	}
	prob.Stop = func() bool { return ctx.Err() != nil }
	prob.Progress = progress
	res, err := Run(prob, exp.Planner.Name)
	prob.Progress = nil // the spec's planner only: its alternatives are a small part
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, err
	}
	if res.Best.Alloc == nil {
		return nil, nil, fmt.Errorf("%w max_nodes %d", ErrNoPlan, exp.Cluster.MaxNodes)
	}
	static := res
	if exp.Planner.Name != spec.PlannerStatic {
		static = Static(prob)
	}
	predicted, err := s.Simulate(res.Best.Alloc)
	if err != nil {
		return nil, nil, err
	}
	rep := NewReport(exp, exp.Planner.Name, exp.Deadline.Seconds(), res.Feasible, predicted)
	rep.Evaluated = res.Evaluated
	rep.Unproven = exp.Planner.Name == spec.PlannerOptimal && !res.Exact
	if static.Best.Alloc != nil {
		sp, err := s.Simulate(static.Best.Alloc)
		if err != nil {
			return nil, nil, err
		}
		rep.SetStatic(static.Feasible, sp)
	}
	subsets, alts, err := Alternatives(prob, exp.Planner.Name)
	if err != nil {
		return nil, nil, err
	}
	for i, alt := range alts {
		ap, err := s.Simulate(alt.Best.Alloc)
		if err != nil {
			return nil, nil, err
		}
		rep.AddAlternative(subsets[i].Name, alt.Feasible, ap)
	}
	if hedged(res.Best.Alloc) {
		// A hedged plan is shown beside both of its markets alone: on-demand only (above) and
		// spot only.
		m := s.Model()
		if spot := OffersWhere(m, func(o *sim.Offer) bool { return o.Market == spec.MarketSpot }); len(spot) < len(m.Offers) {
			alt, err := Run(prob.Restrict(spot), exp.Planner.Name)
			if err != nil {
				return nil, nil, err
			}
			if alt.Best.Alloc != nil {
				ap, err := s.Simulate(alt.Best.Alloc)
				if err != nil {
					return nil, nil, err
				}
				rep.AddAlternative("spot only", alt.Feasible, ap)
			}
		}
	}
	return rep, &res, ctx.Err()
}

// hedged says whether a plan holds a hedged stage (sim.StageAlloc.OnDemand).
func hedged(a sim.Alloc) bool {
	for _, stages := range a {
		for _, sa := range stages {
			if sa.OnDemand > 0 {
				return true
			}
		}
	}
	return false
}

// PlanSpec is Plan with exp's own simulator (sim.For) and no progress: what the dashboard's
// plan page shows.
func PlanSpec(ctx context.Context, exp *spec.Experiment) (*Report, *Result, error) {
	s, err := sim.For(exp)
	if err != nil {
		return nil, nil, err
	}
	return Plan(ctx, exp, s, nil)
}

// DeadlineError is a plan that misses the deadline at the spec's quantile: the fastest plan a
// planner found (Found), or one given. It matches ErrInfeasible.
type DeadlineError struct {
	Deadline time.Duration
	Quantile float64 // the share of runs that must meet it
	JCT      float64 // the plan's completion time at that quantile, in seconds
	Found    bool
}

func (e *DeadlineError) Error() string {
	if e.Found {
		return fmt.Sprintf("no plan meets the deadline %s at p%.0f: the fastest plan found takes %s (p%.0f)",
			e.Deadline, 100*e.Quantile, format.Clock(e.JCT), 100*e.Quantile)
	}
	return fmt.Sprintf("the plan misses the deadline %s at p%.0f: it takes %s (p%.0f)",
		e.Deadline, 100*e.Quantile, format.Clock(e.JCT), 100*e.Quantile)
}

func (e *DeadlineError) Is(target error) bool { return target == ErrInfeasible }

// Check says, with a DeadlineError, when the planner's best plan misses exp's deadline.
func (r *Result) Check(exp *spec.Experiment) error {
	if r.Feasible {
		return nil
	}
	return &DeadlineError{Deadline: exp.Deadline.D(), Quantile: exp.Planner.DeadlineQuantile, JCT: r.Best.JCT, Found: true}
}

// CheckOutcome says, with a DeadlineError, when a given plan's predicted outcome misses exp's
// deadline at its quantile (no deadline: never).
func CheckOutcome(exp *spec.Experiment, o sim.Outcome) error {
	d := exp.Deadline.Seconds()
	if jct := sim.Quantile(o.JCT, exp.Planner.DeadlineQuantile); d > 0 && jct > d {
		return &DeadlineError{Deadline: exp.Deadline.D(), Quantile: exp.Planner.DeadlineQuantile, JCT: jct}
	}
	return nil
}

// BudgetError is a plan whose predicted mean cost is over the spec's budget. It matches
// ErrInfeasible.
type BudgetError struct {
	Planner      string
	Deadline     time.Duration
	Quantile     float64
	Cost, Budget float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("over budget: the %s plan, the cheapest it found that meets the deadline %s at p%.0f, costs %s (mean); the budget is %s (budget.max_cost_usd)",
		e.Planner, e.Deadline, 100*e.Quantile, format.Money(e.Cost), format.Money(e.Budget))
}

func (e *BudgetError) Is(target error) bool { return target == ErrInfeasible }

// CheckBudget says, with a BudgetError, when rep's predicted mean cost is over exp's budget.
func CheckBudget(exp *spec.Experiment, rep *Report) error {
	if b := exp.Budget.MaxCostUSD; b > 0 && rep.Predicted.Cost.Mean > b {
		return &BudgetError{Planner: rep.Planner, Deadline: exp.Deadline.D(), Quantile: exp.Planner.DeadlineQuantile, Cost: rep.Predicted.Cost.Mean, Budget: b}
	}
	return nil
}
