package executor

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// BudgetError stops a run whose forecast final cost is over budget.max_cost_usd under
// budget.stop: every stage before Stage synced, its results and checkpoints saved; for an ASHA
// run (Phase), at phase Stage, every result so far journaled and its jobs in flight stopped at
// their checkpoints.
type BudgetError struct {
	Bracket          string
	Stage            int
	Phase            bool
	Forecast, Budget float64
}

func (e *BudgetError) Error() string {
	where := fmt.Sprintf("stopped before stage %d of bracket %s, everything before it saved", e.Stage+1, e.Bracket)
	if e.Phase {
		where = fmt.Sprintf("stopped in phase %d of the asha schedule, every result so far saved and the jobs in flight stopped at their checkpoints", e.Stage+1)
	}
	return fmt.Sprintf("budget: the forecast final cost %s is over budget.max_cost_usd %s: %s (raise the budget with `resume --spec`, or remove budget.stop to re-plan for it)",
		format.Money(e.Forecast), format.Money(e.Budget), where)
}

// reviews says whether the run weighs revisions at all: to re-plan, or to forecast for a budget.
func (x *run) reviews() bool { return x.cfg.Replan || x.cfg.Experiment.Budget.MaxCostUSD > 0 }

// reviewRules are the re-plan rules of a review at (b, k): without re-planning, or under
// budget.stop, the budget is forecast but not re-planned for.
func (x *run) reviewRules(b, k int) planner.ReplanRules {
	rules := planner.DefaultReplanRules(x.cfg.Experiment)
	rules.Seed ^= int64(b)<<32 | int64(k)
	if !x.cfg.Replan || x.cfg.Experiment.Budget.Stop {
		rules.Budget = 0
	}
	return rules
}

// review weighs a revision of bracket b's plan from stage k on, before k starts: from what the
// run observed, where it stands and what it spent (planner.Replan decides; act acts).
func (x *run) review(ctx context.Context, b, k int) error {
	if !x.reviews() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	model, now := x.present(b, k, x.clk.Now())
	x.mu.Unlock()
	name := x.st.Brackets[b].Name
	rev, err := planner.Replan(model, now, x.reviewRules(b, k))
	if err != nil { // a forecast that cannot be made leaves the plan as it is
		fmt.Fprintf(x.log, "re-plan of %s stage %d: %v: the plan is kept\n", name, k+1, err)
		return nil
	}
	return x.act(rev, reviewed{bracket: b, stage: k, where: fmt.Sprintf("%s from stage %d", name, k+1),
		before: gpusOf(now.Plan), plan: rev.Plan, after: sim.FormatStages(rev.Plan)})
}

// reviewed is what a review weighed: bracket b's plan from stage (or an ASHA run's phase) on,
// its GPUs before, and the plan a revision journals (after: as said).
type reviewed struct {
	bracket, stage int
	phase          bool
	where          string
	before         []int
	plan           []sim.StageAlloc
	after          string
}

// act carries out a review's revision: journaled (EvReplan) and said when it changes the plan;
// the forecast journaled (EvForecast) when it does not; a forecast over the budget said, and
// under budget.stop the run ended with a *BudgetError.
func (x *run) act(rev planner.Revision, at reviewed) error {
	budget := x.cfg.Experiment.Budget
	// What the run is forecast to cost with the plan it would run next: the revision's, when it
	// makes one. Under budget.stop, crossing the budget either way stops it (a revision that
	// would meet the deadline only by spending past the budget is not made).
	next := rev.Before
	if rev.Change && x.cfg.Replan {
		next = rev.After
	}
	if budget.MaxCostUSD > 0 && next.Cost > budget.MaxCostUSD && (budget.Stop || !x.cfg.Replan) {
		if err := x.record(journal.Event{Ev: journal.EvForecast, Bracket: at.bracket, Stage: at.stage, After: &next, Reason: "over budget"}, false); err != nil {
			return err
		}
		if budget.Stop {
			return &BudgetError{Bracket: x.st.Brackets[at.bracket].Name, Stage: at.stage, Phase: at.phase, Forecast: next.Cost, Budget: budget.MaxCostUSD}
		}
		fmt.Fprintf(x.log, "BUDGET: the forecast final cost %s is over budget.max_cost_usd %s, and --no-replan keeps the plan\n", format.Money(next.Cost), format.Money(budget.MaxCostUSD))
		return nil
	}
	if !rev.Change || !x.cfg.Replan {
		kept := rev.Before
		x.mu.Lock()
		prev := x.st.Forecast
		x.mu.Unlock()
		if err := x.record(journal.Event{Ev: journal.EvForecast, Bracket: at.bracket, Stage: at.stage, After: &kept, Reason: rev.Reason}, false); err != nil {
			return err
		}
		why := rev.Reason
		if !x.cfg.Replan {
			why = "the plan is kept (re-planning is off)"
		}
		x.sayDeadline(prev, &kept, why)
		return nil
	}
	before, after := rev.Before, rev.After
	if err := x.record(journal.Event{Ev: journal.EvReplan, Bracket: at.bracket, Stage: at.stage, Plan: at.plan, Reason: rev.Reason, Before: &before, After: &after, GivesWay: rev.DeadlineGivesWay}, true); err != nil {
		return err
	}
	fmt.Fprintf(x.log, "re-plan %s: %s: GPUs %v -> %s; forecast JCT %s -> %s (P(miss) %.0f%% -> %.0f%%), cost %s -> %s\n",
		at.where, rev.Reason, at.before, at.after, format.Clock(before.JCT), format.Clock(after.JCT),
		100*before.MissProb, 100*after.MissProb, format.Money(before.Cost), format.Money(after.Cost))
	if rev.DeadlineGivesWay {
		fmt.Fprintf(x.log, "BUDGET: to stay within budget.max_cost_usd %s the deadline gives way: the forecast JCT %s is past the deadline %s\n",
			format.Money(budget.MaxCostUSD), format.Clock(after.JCT), format.Clock(x.cfg.Experiment.Deadline.D().Seconds()))
	}
	if rev.OverBudget {
		fmt.Fprintf(x.log, "BUDGET: no plan keeps the forecast final cost within budget.max_cost_usd %s: the cheapest is %s\n", format.Money(budget.MaxCostUSD), format.Money(after.Cost))
	}
	return nil
}

// sayDeadline says a forecast that crossed the deadline, either way, as it is journaled: the
// first forecast to miss it at the spec's quantile (after one that met it, or none), and the
// first to meet it again. A journaled forecast that no one hears of is a promise broken in
// silence; one said at every review is noise.
func (x *run) sayDeadline(prev, now *planner.Forecast, why string) {
	exp := x.cfg.Experiment
	deadline, q := exp.Deadline.D().Seconds(), exp.Planner.DeadlineQuantile
	was, is := runstate.DeadlineWarning(prev, deadline, q) != "", runstate.DeadlineWarning(now, deadline, q)
	switch {
	case is != "" && !was:
		fmt.Fprintf(x.log, "DEADLINE: %s; %s\n", is, why)
	case is == "" && was:
		fmt.Fprintf(x.log, "DEADLINE: the forecast meets the deadline %s again: JCT %s, P(miss) %.0f%%\n", format.Clock(deadline), format.Clock(now.JCT), 100*now.MissProb)
	}
}

// present is where bracket b stands before stage k, with the model as the run observed it.
// Callers hold x.mu.
func (x *run) present(b, k int, now time.Time) (*sim.Model, planner.Present) {
	s := x.st
	model := x.model.Posterior(x.st.SimEvidence(stageWeight(b, k), now))
	p := planner.Present{
		Stages:  s.Brackets[b].Stages[k:],
		Plan:    append([]sim.StageAlloc(nil), s.Plan[b][k:]...),
		Held:    x.heldOf(b, k),
		Elapsed: now.Sub(s.Start).Seconds() / x.cfg.TimeScale,
		Spent:   x.st.Bill(now).Total,
	}
	// The other brackets of its round keep what they hold and what their plans will hold; the
	// rest of their plans is forecast as it stands (their running stages' remainder is left out:
	// too little to weigh against a budget). Hyperband's later rounds start once this one has
	// ended: their plans are forecast whole, for their cost and for the time they take after it.
	p.MaxNodes = x.model.MaxNodes
	rules := planner.DefaultReplanRules(x.cfg.Experiment)
	round := s.Brackets[b].Round
	later := sim.NewRounds(s.Brackets, rules.Samples)
	laterRounds := false
	for c := range s.Brackets {
		if c == b || s.Brackets[c].Round < round {
			continue
		}
		if s.Brackets[c].Round > round {
			alone := s.Brackets[c]
			alone.Round = 0 // simulated from its own start
			rest := sim.New(model, []spec.Bracket{alone}, rules.Samples, rules.Seed)
			o := rest.EvaluateBracket(0, s.Plan[c])
			p.OtherCost += sim.Summarize(o.Cost).Mean
			later.Add(c, o.JCT)
			laterRounds = true
			continue
		}
		next := x.nextUnstarted(c)
		peak := len(s.Nodes[c])
		for _, sa := range s.Plan[c][next:] {
			peak = max(peak, sa.Nodes)
		}
		p.MaxNodes -= peak
		if next < len(s.Plan[c]) {
			rest := sim.New(model, []spec.Bracket{{Name: s.Brackets[c].Name, Stages: s.Brackets[c].Stages[next:]}}, rules.Samples, rules.Seed)
			if rest.HoldNodes([]sim.Held{x.heldOf(c, next)}) == nil {
				p.OtherCost += sim.Summarize(rest.EvaluateBracket(0, s.Plan[c][next:]).Cost).Mean
			}
		}
	}
	if laterRounds {
		jcts := make([]float64, rules.Samples)
		later.Total(jcts)
		p.Later = sim.Summarize(jcts).Mean
	}
	return model, p
}

// heldOf is what bracket b holds before its stage k: its nodes, of the kind stage k-1 ran on
// (a node a provider fell back to counts as that kind: it serves it), those of a hedged stage's
// on-demand tier apart. Callers hold x.mu.
func (x *run) heldOf(b, k int) sim.Held {
	h := sim.Held{Nodes: len(x.st.Nodes[b])}
	if k == 0 {
		return h
	}
	before := x.st.Plan[b][k-1]
	h.Type, h.Market = before.Type, before.Market
	if before.OnDemand == 0 {
		return h
	}
	// A hedged stage's on-demand tier, held beside its spot nodes: all of them, when the
	// market took every spot node.
	for _, n := range x.st.Nodes[b] {
		if x.st.ODTier[n.ID] {
			h.OnDemand++
		}
	}
	if h.OnDemand == h.Nodes {
		h.Market, h.OnDemand = spec.MarketOnDemand, 0
	}
	return h
}

// nextUnstarted is bracket c's first stage not started. Callers hold x.mu.
func (x *run) nextUnstarted(c int) int {
	for k := range x.st.Brackets[c].Stages {
		if x.st.StageAt[runstate.StageKey{Bracket: c, Stage: k}].Start.IsZero() {
			return k
		}
	}
	return len(x.st.Brackets[c].Stages)
}

// stageWeight weighs evidence for a decision before bracket b's stage k: a stage's evidence
// counts a quarter as much for every stage it lies before k - 1, and another bracket's half as
// much, so that a job that changed pace is followed (Srifty's sliding window).
func stageWeight(b, k int) func(runstate.EvidenceKey) float64 {
	return func(key runstate.EvidenceKey) float64 {
		w := math.Pow(0.25, float64(max(0, k-1-key.Stage)))
		if key.Bracket != b {
			w *= 0.5
		}
		return w
	}
}

func gpusOf(plan []sim.StageAlloc) []int {
	out := make([]int, len(plan))
	for i, sa := range plan {
		out[i] = sa.GPUs
	}
	return out
}
