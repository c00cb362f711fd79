package virtual_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/spec"
)

// examples/replan.yaml in virtual time: its trainer.env slows every iteration from the second
// stage on by 30%, as the synthetic trainer does. With the plan kept the job misses its 60 s
// deadline; with re-planning the driver sees the slow stage, gives the last stage more GPUs at
// the sync before it, and meets it; the revision is journaled with why and both forecasts.
func TestReplanMeetsTheDeadlineASlowJobMisses(t *testing.T) {
	exp, alloc, _ := plan(t, "../../examples/replan.yaml")
	run := func(replan bool) (*executor.Result, []executor.Event) {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: path, RunID: "replan", Replan: replan})
		if err != nil || !out.Result.Finished {
			t.Fatalf("replan %v: %v", replan, err)
		}
		events, err := executor.ReadJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		return out.Result, events
	}
	deadline := exp.Deadline.Seconds()
	without, _ := run(false)
	with, events := run(true)
	t.Logf("without re-planning: JCT %.1f s, cost $%.4f; with it: JCT %.1f s, cost $%.4f, %d revision(s)",
		without.Realized.JCT, without.Realized.Cost, with.Realized.JCT, with.Realized.Cost, len(with.Revisions))
	if len(without.Revisions) != 0 || without.Realized.JCT <= deadline {
		t.Fatalf("without re-planning: %d revisions, JCT %.1f s: the slow job should miss its %v s deadline", len(without.Revisions), without.Realized.JCT, deadline)
	}
	if len(with.Revisions) == 0 || with.Realized.JCT > deadline {
		t.Fatalf("with re-planning: %d revisions, JCT %.1f s (deadline %v s)", len(with.Revisions), with.Realized.JCT, deadline)
	}
	last := with.Revisions[len(with.Revisions)-1]
	final := with.Brackets[0].Stages[len(with.Brackets[0].Stages)-1].GPUs
	if final <= without.Brackets[0].Stages[len(without.Brackets[0].Stages)-1].GPUs || last.Plan[len(last.Plan)-1].GPUs != final ||
		!strings.Contains(last.Reason, "misses the deadline") || last.Before.MissProb <= last.After.MissProb {
		t.Fatalf("the last stage ran on %d GPUs; last revision %+v", final, last)
	}
	journaled := 0
	for _, e := range events {
		if e.Ev == executor.EvReplan {
			journaled++
			if e.Reason == "" || e.Before == nil || e.After == nil || len(e.Plan) == 0 {
				t.Errorf("a revision journaled without why or forecasts: %+v", e)
			}
		}
	}
	if journaled != len(with.Revisions) {
		t.Fatalf("%d revisions journaled, %d reported", journaled, len(with.Revisions))
	}
}

// A budget the slow job's forecast crosses: under budget.stop the run stops before the stage that
// would cross it, with a *executor.BudgetError, every node released and every finished stage
// kept; resumed with a higher budget it finishes without rerunning what was done. Without stop,
// the driver re-plans for the budget: the deadline gives way, and the run ends within it.
func TestBudgetDuringARun(t *testing.T) {
	withBudget := budgeted(t, "../../examples/replan.yaml")
	_, alloc, _ := plan(t, "../../examples/replan.yaml")
	t.Run("stop", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: withBudget("{max_cost_usd: 0.22, stop: true}"), Alloc: alloc,
			Journal: path, RunID: "budget", Replan: true})
		var over *executor.BudgetError
		if !errors.As(err, &over) || over.Budget != 0.22 || over.Forecast <= 0.22 {
			t.Fatalf("run: %v, want a *executor.BudgetError over $0.22", err)
		}
		if held := out.World.Held(); len(held) > 0 {
			t.Fatalf("nodes left held after the budget stop: %v", held)
		}
		before, _ := executor.ReadJournal(path)
		snap, err := executor.Fold(executor.Config{Experiment: withBudget("{max_cost_usd: 0.22, stop: true}"), Alloc: alloc, Past: before})
		if err != nil || snap.Phase != executor.PhaseStopped || snap.Cause != executor.StopBudget {
			t.Fatalf("the journal says %+v (%v), want stopped for the budget", snap, err)
		}
		synced := 0
		for _, w := range snap.Stages {
			if !w.End.IsZero() {
				synced++
			}
		}
		if synced == 0 {
			t.Fatal("stopped before any stage synced")
		}
		out, err = virtual.Run(context.Background(), virtual.Config{Experiment: withBudget("{max_cost_usd: 1, stop: true}"), Alloc: alloc,
			Journal: path, RunID: "budget", Replan: true})
		if err != nil || !out.Result.Finished || out.Result.Best == nil {
			t.Fatalf("resumed with a raised budget: %v", err)
		}
		all, _ := executor.ReadJournal(path)
		for _, e := range all[len(before):] {
			if e.Ev == executor.EvLaunch && e.Stage < synced {
				t.Fatalf("resume relaunched %s in stage %d, finished before the stop", e.Trial, e.Stage)
			}
		}
	})
	t.Run("replan", func(t *testing.T) {
		out, err := virtual.Run(context.Background(), virtual.Config{Experiment: withBudget("{max_cost_usd: 0.22}"), Alloc: alloc,
			Journal: filepath.Join(t.TempDir(), "journal.jsonl"), RunID: "budget", Replan: true})
		if err != nil || !out.Result.Finished {
			t.Fatalf("run: %v", err)
		}
		res := out.Result
		gaveWay := false
		for _, r := range res.Revisions {
			gaveWay = gaveWay || (r.DeadlineGivesWay && strings.Contains(r.Reason, "over the budget"))
		}
		t.Logf("cost $%.4f (budget $0.22), JCT %.1f s (deadline 60 s), %d revision(s)", res.Realized.Cost, res.Realized.JCT, len(res.Revisions))
		if !gaveWay || res.Realized.Cost > 0.22*1.05 || res.Realized.JCT <= 60 {
			t.Fatalf("realized $%.4f in %.1f s with revisions %+v: the deadline should give way to the budget", res.Realized.Cost, res.Realized.JCT, res.Revisions)
		}
	})
}

// A job of three Hyperband rounds: each review in a round forecasts the whole run (the later
// rounds' time after the round's end, their cost on top), so the first round's forecasts land
// near the run's realized JCT and cost, not near the first round's end.
func TestReplanForecastsLaterRounds(t *testing.T) {
	exp, alloc, _ := plan(t, "testdata/replan-rounds.yaml")
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: path, RunID: "rounds", Replan: true})
	if err != nil || !out.Result.Finished {
		t.Fatalf("run: %v", err)
	}
	events, err := executor.ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	brackets := exp.Algorithm.Brackets()
	res := out.Result
	var start, firstRoundEnd time.Time
	for _, e := range events {
		if e.Ev == executor.EvStart {
			start = e.At
		}
		if e.Ev == executor.EvSync && brackets[e.Bracket].Round == 0 && e.At.After(firstRoundEnd) {
			firstRoundEnd = e.At
		}
	}
	checked := 0
	for _, e := range events {
		if (e.Ev != executor.EvForecast && e.Ev != executor.EvReplan) || brackets[e.Bracket].Round != 0 {
			continue
		}
		checked++
		f := e.After
		t.Logf("bracket %s stage %d: forecast JCT %.0f s, cost $%.2f; realized %.0f s, $%.2f (the first round ended at %.0f s)",
			brackets[e.Bracket].Name, e.Stage+1, f.JCT, f.Cost, res.Realized.JCT, res.Realized.Cost, firstRoundEnd.Sub(start).Seconds())
		if math.Abs(f.JCT/res.Realized.JCT-1) > 0.2 || math.Abs(f.Cost/res.Realized.Cost-1) > 0.2 {
			t.Errorf("a review in the first round forecast %.0f s and $%.2f for a run of %.0f s and $%.2f", f.JCT, f.Cost, res.Realized.JCT, res.Realized.Cost)
		}
	}
	if checked == 0 {
		t.Fatal("no review in the first round")
	}
}

// budgeted reads a spec and returns it with a budget block added (YAML, as written in a spec).
func budgeted(t *testing.T, file string) func(budget string) *spec.Experiment {
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return func(budget string) *spec.Experiment {
		exp, err := spec.Parse(filepath.Base(file), append(text, []byte("budget: "+budget+"\n")...), nil)
		if err != nil {
			t.Fatal(err)
		}
		return exp
	}
}
