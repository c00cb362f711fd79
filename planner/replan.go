package planner

import (
	"fmt"
	"math"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Present is where a run stands when one of its brackets reaches a sync and the driver weighs a
// revision of that bracket's stages not yet started.
type Present struct {
	// Stages are the bracket's stages not yet started, and Plan their current allocation.
	Stages []spec.Stage
	Plan   []sim.StageAlloc
	// Held is the nodes the bracket holds now (up, and paid for so far), and their kind.
	Held sim.Held
	// MaxNodes is how many nodes the bracket may hold: max_nodes less what the other brackets'
	// plans hold at most from now on.
	MaxNodes int
	// Elapsed is spec seconds since the run started; Spent is dollars spent so far by the whole
	// run; OtherCost what the other brackets' rest is predicted to cost (later rounds' included).
	Elapsed, Spent, OtherCost float64
	// Later is the mean time Hyperband's later rounds are predicted to take once the bracket's
	// round has ended (0 in the last round): the bracket's rest must leave it before the deadline.
	Later float64
}

// ReplanRules say when a revision is worth making.
type ReplanRules struct {
	Deadline, Quantile float64 // the job's, in spec seconds from the run's start
	// Budget is budget.max_cost_usd (0: none).
	Budget float64
	// Saving is the least share of the rest's predicted cost a new plan must save to replace one
	// that still meets the deadline; Margin how far above 1 - quantile the current plan's
	// predicted P(miss) must rise before it is replaced for the deadline. Both are hysteresis:
	// noise in what a stage observed should not churn the plan.
	Saving, Margin float64
	// Uncertainty is the model error a new plan must leave room for (sim.Model.Uncertainty):
	// evidence from a stage or two does not pin the model down, and a plan picked to just meet
	// the deadline on the posterior's means would miss it on the first surprise.
	Uncertainty float64
	Samples     int
	Seed        int64
}

// DefaultReplanRules: a new plan must save 10% of the rest, or the current one must miss the
// deadline 5 points more often than the quantile allows.
func DefaultReplanRules(exp *spec.Experiment) ReplanRules {
	return ReplanRules{Deadline: exp.Deadline.D().Seconds(), Quantile: exp.Planner.DeadlineQuantile, Budget: exp.Budget.MaxCostUSD,
		Saving: 0.10, Margin: 0.05, Uncertainty: 0.15, Samples: exp.Planner.Samples, Seed: exp.Seed}
}

// Forecast is a prediction of a whole run from where it stands: its completion time at the
// deadline quantile (spec seconds from the run's start), its predicted P(miss), and its mean
// final cost (what was spent plus what the rest is predicted to cost).
type Forecast struct {
	JCT      float64 `json:"jct_s"`
	MissProb float64 `json:"p_miss"`
	Cost     float64 `json:"cost_usd"`
}

// Revision is what Replan decided.
type Revision struct {
	// Change is true when Plan replaces the current plan; Reason says why (or why not).
	Change bool
	Reason string
	Plan   []sim.StageAlloc
	// ASHA is an ASHA run's schedule from the phase it is in on (ReplanASHA's; Plan is not set).
	ASHA sim.ASHAPlan
	// Before is the current plan's forecast; After the new plan's (Before when not Change).
	Before, After Forecast
	// OverBudget is true when the forecast after the decision is still over the budget.
	OverBudget bool
	// DeadlineGivesWay is true when the plan meets the budget by missing the deadline.
	DeadlineGivesWay bool
}

// budgetSlack is how far past the deadline a re-plan for the budget may go, in steps: the first
// whose cheapest plan fits the budget wins, so that the deadline gives way as little as it can.
var budgetSlack = []float64{1.25, 1.5, 2, 3, math.Inf(1)}

// Replan decides, on the model as the run has observed it (sim.Model.Posterior), whether a
// bracket's stages not yet started should get a new plan (the rules are decide's). It is a pure
// function of its arguments: the same present, model and rules give the same revision.
func Replan(m *sim.Model, now Present, rules ReplanRules) (Revision, error) {
	if len(now.Stages) == 0 || len(now.Plan) != len(now.Stages) {
		return Revision{}, fmt.Errorf("replan: %d stages left, a plan of %d", len(now.Stages), len(now.Plan))
	}
	sub := *m
	sub.MaxNodes = max(1, now.MaxNodes)
	cautious := sub
	cautious.Uncertainty = rules.Uncertainty
	problem := func(m *sim.Model, left float64) (*Problem, error) {
		s := sim.New(m, []spec.Bracket{{Name: "rest", Stages: now.Stages}}, rules.Samples, rules.Seed)
		if err := s.HoldNodes([]sim.Held{now.Held}); err != nil {
			return nil, fmt.Errorf("replan: %w", err)
		}
		return NewProblem(s, max(left, 1e-9), rules.Quantile)
	}
	left := rules.Deadline - now.Elapsed - now.Later
	p, err := problem(&sub, left) // forecasts: the posterior's means
	if err != nil {
		return Revision{}, err
	}
	rest := func(c Candidate) restPlan[sim.Alloc] {
		return restPlan[sim.Alloc]{plan: c.Alloc, feasible: c.Feasible, jct: c.JCT, jcts: c.outcome.JCT, cost: c.Cost}
	}
	d := decision[sim.Alloc]{rules: rules, elapsed: now.Elapsed, later: now.Later, spent: now.Spent + now.OtherCost, same: sameSplit,
		forecast: func(a sim.Alloc) (restPlan[sim.Alloc], error) { return rest(p.evaluate(a)), nil },
		cheapest: func(left float64) (restPlan[sim.Alloc], error) {
			q, err := problem(&cautious, left) // new plans: with room for the model's error
			if err != nil {
				return restPlan[sim.Alloc]{}, err
			}
			return rest(Greedy(q).Best), nil
		}}
	if cur := (sim.Alloc{now.Plan}); sub.Check(p.brackets(), cur) == nil {
		d.current = &cur // else the plan no longer fits (other brackets hold more now): it must change
	}
	rev, plan, err := d.decide()
	rev.Plan = now.Plan
	if rev.Change {
		rev.Plan = plan[0]
	}
	return rev, err
}

// restPlan is a plan of a run's rest as a re-plan weighs it: whether it meets the deadline at
// the quantile, its JCT there and by sample (spec seconds from now), its mean cost.
type restPlan[P any] struct {
	plan     P
	feasible bool
	jct      float64
	jcts     []float64
	cost     float64
}

// decision is a re-plan of a run's rest, whatever its plans are (stages, an ASHA schedule):
// the current plan (nil when it no longer fits), a forecast of a plan on the posterior's means
// against the deadline, and the cheapest plan a planner finds for a time left on the cautious
// model (its feasible false when none meets it: the fastest).
type decision[P any] struct {
	rules          ReplanRules
	elapsed, spent float64 // spent: so far, and what the rest of the run outside P will cost
	later          float64 // what the run takes after P's rest (Hyperband's later rounds)
	current        *P
	forecast       func(P) (restPlan[P], error)
	cheapest       func(left float64) (restPlan[P], error)
	same           func(a, b P) bool
}

// decide revises the plan:
//   - when the current plan is predicted to miss the deadline more often than the quantile
//     allows (plus Margin), for the cheapest plan that meets it, if one does, else for the
//     fastest, if its JCT at the quantile is at least Margin shorter;
//   - when a plan meeting the deadline saves at least Saving of the rest's cost;
//   - when the forecast final cost is over the budget, for the cheapest plan that meets both,
//     or else the one that fits the budget past the deadline by the least.
//
// It returns the plan to run from now (the current one when the revision is no change).
func (d decision[P]) decide() (Revision, P, error) {
	rules := d.rules
	left := rules.Deadline - d.elapsed - d.later
	forecast := func(c restPlan[P]) Forecast {
		return Forecast{JCT: d.elapsed + c.jct + d.later, MissProb: sim.MissProb(c.jcts, left), Cost: d.spent + c.cost}
	}
	var rev Revision
	var before restPlan[P]
	var keep P
	if d.current != nil {
		var err error
		if before, err = d.forecast(*d.current); err != nil {
			return Revision{}, keep, err
		}
		keep = *d.current
		rev.Before, rev.After = forecast(before), forecast(before)
	}
	overBudget := func(f Forecast) bool { return rules.Budget > 0 && f.Cost > rules.Budget }
	missing := d.current == nil || rev.Before.MissProb > 1-rules.Quantile+rules.Margin
	best, err := d.cheapest(left)
	if err != nil {
		return Revision{}, keep, err
	}
	// A plan said to meet the deadline and to save must do both on the model the current plan is
	// forecast on: best was picked on the cautious model, and at a quantile of 0.5 a plan picked
	// to just meet the deadline there can miss it on the posterior's means (a Table 2 re-plan
	// said "a plan that meets the deadline saves 12%" of one forecast to miss it 56% of the time).
	var saves bool
	var cheaper restPlan[P]
	if d.current != nil && !missing && !overBudget(rev.Before) && best.feasible {
		if cheaper, err = d.forecast(best.plan); err != nil {
			return Revision{}, keep, err
		}
		saves = cheaper.feasible && cheaper.cost <= (1-rules.Saving)*before.cost
	}
	switch {
	case d.current == nil:
		rev.Reason = "the plan no longer fits the nodes left to it"
	case overBudget(rev.Before):
		rev.Reason = fmt.Sprintf("forecast cost %s is over the budget %s", format.Money(rev.Before.Cost), format.Money(rules.Budget))
	case missing && best.feasible:
		rev.Reason = fmt.Sprintf("the plan now misses the deadline %.0f%% of the time (at most %.0f%% allowed)", 100*rev.Before.MissProb, 100*(1-rules.Quantile))
	case missing:
		rev.Reason = fmt.Sprintf("the plan now misses the deadline %.0f%% of the time and no plan meets it", 100*rev.Before.MissProb)
	case saves:
		rev.Reason = fmt.Sprintf("a plan that meets the deadline saves %.0f%% of the rest", 100*(1-cheaper.cost/before.cost))
	default:
		rev.Reason = "the plan holds"
		rev.OverBudget = overBudget(rev.Before)
		return rev, keep, nil
	}
	pick, forBudget := best, false
	if f := forecast(best); overBudget(f) || (!best.feasible && rules.Budget > 0) {
		// The deadline gives way to the budget, by as little as it can; when nothing fits the
		// budget, the cheapest plan there is.
		forBudget = true
		for _, slack := range budgetSlack {
			// The slack stretches the job's deadline, not the time left: once the deadline has
			// passed, time left is negative and stretching it would make every plan infeasible,
			// leaving the fastest, the dearest, for a re-plan meant to save.
			rest := rules.Deadline*slack - d.elapsed - d.later
			if rest <= 0 {
				continue
			}
			if pick, err = d.cheapest(rest); err != nil {
				return Revision{}, keep, err
			}
			if !overBudget(forecast(pick)) {
				break
			}
		}
	}
	after, err := d.forecast(pick.plan) // against the real deadline: pick may come from a laxer one
	if err != nil {
		return Revision{}, keep, err
	}
	if !forBudget && !pick.feasible && d.current != nil && after.jct > (1-rules.Margin)*before.jct {
		// Nothing meets the deadline, and the fastest plan would not be much faster (both
		// forecast on the same model): a run that misses anyway is not made dearer for nothing.
		rev.Reason += fmt.Sprintf("; none is %.0f%% faster: the plan is kept", 100*rules.Margin)
		return rev, keep, nil
	}
	// A plan no better than the current one is not a revision; while the forecast is over the
	// budget, that is one forecast to cost no less.
	if d.current != nil && (d.same(pick.plan, *d.current) || overBudget(rev.Before) && forecast(after).Cost >= rev.Before.Cost) {
		rev.Reason += "; no better plan exists"
		rev.OverBudget = overBudget(rev.Before)
		return rev, keep, nil
	}
	rev.Change, rev.After = true, forecast(after)
	if !after.feasible && !forBudget {
		// Said as it is: the new plan misses too, less often (or sooner) than the one it replaces.
		rev.Reason += fmt.Sprintf("; the new plan still misses it %.0f%% of the time", 100*rev.After.MissProb)
	}
	rev.OverBudget = overBudget(rev.After)
	rev.DeadlineGivesWay = forBudget && !after.feasible
	if d.current == nil {
		rev.Before = rev.After
	}
	return rev, pick.plan, nil
}
