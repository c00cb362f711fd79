package virtual_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
)

// examples/asha-replan.yaml in virtual time: every iteration runs 50% slower than the profile the
// schedule was planned on. With the schedule kept the job misses its 60 s deadline; with
// re-planning the driver sees the slow rungs at a milestone of the first phase, rents more GPUs,
// and meets it. Each revision is journaled with why and both forecasts, applied by the fold
// (the phases run the revised GPUs), and every promotion is still the rule's.
func TestASHAReplanMeetsTheDeadlineASlowJobMisses(t *testing.T) {
	base := planned(t, "../../examples/asha-replan.yaml")
	exp := base.Experiment
	run := func(replan bool) (*runstate.Result, []journal.Event) {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, ASHA: base.ASHA, Journal: path, RunID: "asha-replan", Replan: replan})
		if err != nil || !out.Result.Finished {
			t.Fatalf("replan %v: %v", replan, err)
		}
		if held := out.World.Held(); len(held) > 0 {
			t.Fatalf("replan %v: nodes left held: %v", replan, held)
		}
		events, err := journal.ReadJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		best, err := runstate.VerifyASHA(exp, events)
		if err != nil || out.Result.Best == nil || out.Result.Best.Trial != best {
			t.Fatalf("replan %v: the winner %v, the rule's %q (%v)", replan, out.Result.Best, best, err)
		}
		for _, e := range events {
			if e.Ev == journal.EvFail { // nothing fails here: a gang on a node that shrinks keeps it
				t.Fatalf("replan %v: %s failed in a run without faults: %s", replan, e.Trial, e.Error)
			}
		}
		return out.Result, events
	}
	deadline := exp.Deadline.Seconds()
	without, _ := run(false)
	with, events := run(true)
	t.Logf("plan %v; without re-planning: JCT %.1f s, cost $%.4f; with it: JCT %.1f s, cost $%.4f, %d revision(s)",
		base.ASHA.GPUs, without.Realized.JCT, without.Realized.Cost, with.Realized.JCT, with.Realized.Cost, len(with.Revisions))
	if len(without.Revisions) != 0 || without.Realized.JCT <= deadline {
		t.Fatalf("without re-planning: %d revisions, JCT %.1f s: the slow job should miss its %v s deadline", len(without.Revisions), without.Realized.JCT, deadline)
	}
	if len(with.Revisions) == 0 || with.Realized.JCT > deadline {
		t.Fatalf("with re-planning: %d revisions, JCT %.1f s (deadline %v s)", len(with.Revisions), with.Realized.JCT, deadline)
	}
	first := with.Revisions[0]
	if !first.Phase || first.Stage != 0 || first.Plan[0].GPUs <= base.ASHA.GPUs[0] || !strings.Contains(first.Reason, "misses the deadline") ||
		first.Before.MissProb <= first.After.MissProb || !strings.HasPrefix(first.Where(), "asha from phase 1") {
		t.Fatalf("the first revision %+v should give the first phase more GPUs for the deadline", first)
	}
	// The phases ran what the revisions said: one that changed the GPUs of the phase the run was
	// in began a phase of its own, on its GPUs, when it was made.
	for _, r := range with.Revisions {
		if r.Plan[0].GPUs == r.GPUsBefore[0] {
			continue
		}
		began := false
		for _, p := range with.Phases {
			began = began || (p.Start == r.At && p.GPUs == r.Plan[0].GPUs)
		}
		if !began {
			t.Fatalf("the revision at %.1f s to %s began no phase: %+v", r.At, r.NewPlan(), with.Phases)
		}
	}
	journaled, forecasts := 0, 0
	for _, e := range events {
		switch e.Ev {
		case journal.EvReplan:
			journaled++
			if e.Reason == "" || e.Before == nil || e.After == nil || len(e.Plan) == 0 {
				t.Errorf("a revision journaled without why or forecasts: %+v", e)
			}
		case journal.EvForecast:
			forecasts++
		}
	}
	if journaled != len(with.Revisions) || journaled+forecasts < 4 {
		t.Fatalf("%d revisions journaled, %d reported, %d forecasts: a review at each quarter of the trials and each phase", journaled, len(with.Revisions), forecasts)
	}
	// The realized run lands near the last revision's forecast.
	if last := with.Revisions[len(with.Revisions)-1]; with.Realized.JCT > 1.1*last.After.JCT || with.Realized.Cost > 1.15*last.After.Cost {
		t.Fatalf("realized %.1f s, $%.4f; the last revision forecast %.1f s, $%.4f", with.Realized.JCT, with.Realized.Cost, last.After.JCT, last.After.Cost)
	}
	// A replay of the journal (status, report, resume) sees the same revisions and phases.
	replayed, _, err := runstate.Inspect(runstate.Plan{Experiment: exp, ASHA: base.ASHA}, events, events[len(events)-1].At)
	if err != nil || len(replayed.Revisions) != len(with.Revisions) || len(replayed.Phases) != len(with.Phases) {
		t.Fatalf("the replay: %v, %d revisions, %d phases", err, len(replayed.Revisions), len(replayed.Phases))
	}
	for j, p := range replayed.Phases {
		if p.GPUs != with.Phases[j].GPUs {
			t.Fatalf("replayed phase %d holds %d GPUs, the run's %d", j+1, p.GPUs, with.Phases[j].GPUs)
		}
	}
}

// A budget an ASHA run's forecast crosses: under budget.stop the run stops at a review, with a
// *executor.BudgetError naming the phase, its jobs in flight stopped, every node released;
// resumed with a higher budget it finishes, every promotion the rule's and none taken twice.
// Without stop, the driver re-plans for the budget, and the deadline gives way.
func TestASHABudgetDuringARun(t *testing.T) {
	withBudget := budgeted(t, "../../examples/asha-replan.yaml")
	base := planned(t, "../../examples/asha-replan.yaml")
	t.Run("stop", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: withBudget("{max_cost_usd: 0.36, stop: true}"), ASHA: base.ASHA,
			Journal: path, RunID: "budget", Replan: true})
		var over *executor.BudgetError
		if !errors.As(err, &over) || !over.Phase || over.Budget != 0.36 || over.Forecast <= 0.36 || !strings.Contains(err.Error(), "phase") {
			t.Fatalf("run: %v, want a *executor.BudgetError of a phase over $0.36", err)
		}
		if held := out.World.Held(); len(held) > 0 {
			t.Fatalf("nodes left held after the budget stop: %v", held)
		}
		before, _ := journal.ReadJournal(path)
		snap, err := runstate.Fold(runstate.Plan{Experiment: withBudget("{max_cost_usd: 0.36, stop: true}"), ASHA: base.ASHA}, before)
		if err != nil || snap.Phase != runstate.PhaseStopped || snap.Cause != journal.StopBudget {
			t.Fatalf("the journal says %+v (%v), want stopped for the budget", snap, err)
		}
		exp := withBudget("{max_cost_usd: 1, stop: true}")
		out, err = virtual.Run(context.Background(), virtual.Config{Experiment: exp, ASHA: base.ASHA, Journal: path, RunID: "budget", Replan: true})
		if err != nil || !out.Result.Finished || out.Result.Best == nil {
			t.Fatalf("resumed with a raised budget: %v", err)
		}
		all, _ := journal.ReadJournal(path)
		if best, err := runstate.VerifyASHA(exp, all); err != nil || best != out.Result.Best.Trial {
			t.Fatalf("the resumed run's winner %s, the rule's %q: %v", out.Result.Best.Trial, best, err)
		}
	})
	t.Run("replan", func(t *testing.T) {
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: withBudget("{max_cost_usd: 0.45}"), ASHA: base.ASHA,
			Journal: filepath.Join(t.TempDir(), "journal.jsonl"), RunID: "budget", Replan: true})
		if err != nil || !out.Result.Finished {
			t.Fatalf("run: %v", err)
		}
		res := out.Result
		forBudget := false
		for _, r := range res.Revisions {
			forBudget = forBudget || strings.Contains(r.Reason, "over the budget")
		}
		t.Logf("cost $%.4f (budget $0.45), JCT %.1f s (deadline 60 s), revisions %+v", res.Realized.Cost, res.Realized.JCT, res.Revisions)
		if !forBudget || res.Realized.Cost > 0.45*1.02 {
			t.Fatalf("realized $%.4f in %.1f s with revisions %+v: the schedule should be revised for the budget", res.Realized.Cost, res.Realized.JCT, res.Revisions)
		}
	})
}
