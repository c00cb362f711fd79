package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// With re-planning, a plan that cannot meet the deadline is revised at the first sync: the
// revision is journaled with why and both forecasts, the stages after it run on its GPUs, the
// result lists it, and a replay of the journal gives the same plan. Without re-planning nothing
// changes.
func TestReplanIsJournaledFollowedAndReplayed(t *testing.T) {
	// The plan's ~10 s cannot meet a 2 s deadline; two GPUs per trial are faster.
	spec := strings.Replace(shaSpec, "deadline: 1h", "deadline: 2s", 1)
	spec = strings.Replace(spec, "iter_latency: {1: {mean: 1}}", "iter_latency: {1: {mean: 1}, 2: {mean: 0.6}}", 1)
	for _, replan := range []bool{false, true} {
		h := newHarness(t, spec)
		h.cfg.Replan = replan
		res, events, err := h.run(t, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var revisions []journal.Event
		stageGPUs := map[int]int{}
		for _, e := range events {
			switch e.Ev {
			case journal.EvReplan:
				revisions = append(revisions, e)
			case journal.EvStage:
				stageGPUs[e.Stage] = e.GPUs
			}
		}
		if !replan {
			if len(revisions) != 0 || len(res.Revisions) != 0 {
				t.Fatalf("revisions without re-planning: %+v", revisions)
			}
			continue
		}
		if len(revisions) == 0 {
			t.Fatalf("no revision of a plan that misses its deadline:\n%s", h.log.String())
		}
		first := revisions[0]
		if first.Stage != 1 || first.Before == nil || first.After == nil || first.Reason == "" || first.Before.MissProb < 0.9 {
			t.Fatalf("first revision %+v", first)
		}
		// The stages run on the last revision's GPUs, more than the plan gave them.
		last := revisions[len(revisions)-1]
		for i, sa := range last.Plan {
			k := last.Stage + i
			if stageGPUs[k] != sa.GPUs || res.Brackets[0].Stages[k].GPUs != sa.GPUs {
				t.Fatalf("stage %d ran on %d GPUs (result %d), the revision gave it %d", k, stageGPUs[k], res.Brackets[0].Stages[k].GPUs, sa.GPUs)
			}
			if sa.GPUs < h.cfg.Alloc[0][k].GPUs {
				t.Fatalf("stage %d revised from %d to %d GPUs to go faster", k, h.cfg.Alloc[0][k].GPUs, sa.GPUs)
			}
		}
		if len(res.Revisions) != len(revisions) || res.Revisions[0].Reason != first.Reason || res.Forecast == nil {
			t.Fatalf("result revisions %+v, forecast %v", res.Revisions, res.Forecast)
		}
		p := runstate.Plan{Experiment: h.cfg.Experiment, Alloc: h.cfg.Alloc, ASHA: h.cfg.ASHA, TimeScale: h.cfg.TimeScale}
		again, err := runstate.Replay(p, events, h.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		for k, st := range again.Brackets[0].Stages {
			if st.GPUs != res.Brackets[0].Stages[k].GPUs {
				t.Fatalf("replayed stage %d on %d GPUs, ran on %d", k, st.GPUs, res.Brackets[0].Stages[k].GPUs)
			}
		}
		if len(again.Revisions) != len(res.Revisions) {
			t.Fatalf("replayed %d revisions of %d", len(again.Revisions), len(res.Revisions))
		}
	}
}

// Under budget.stop, a forecast over the budget stops the run at the next sync with a
// *BudgetError, the stop journaled and every node released; without stop and without
// re-planning, it is only said.
func TestBudgetStopReleasesEverything(t *testing.T) {
	spec := shaSpec + "budget: {max_cost_usd: 0.001, stop: true}\n"
	h := newHarness(t, spec)
	_, events, err := h.run(t, context.Background())
	var over *executor.BudgetError
	if !errors.As(err, &over) || over.Stage != 1 || over.Forecast <= 0.001 {
		t.Fatalf("err %v", err)
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the budget stop", h.provider.Held())
	}
	if last := events[len(events)-1]; last.Ev != journal.EvStop || !strings.Contains(last.Error, "budget") {
		t.Fatalf("last event %+v", last)
	}
	h = newHarness(t, shaSpec+"budget: {max_cost_usd: 0.001}\n")
	if _, _, err := h.run(t, context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.log.String(), "BUDGET: the forecast final cost") {
		t.Fatalf("the crossing was not said:\n%s", h.log.String())
	}
}

// Under budget.stop, a revision that would meet the deadline only by spending past the budget is
// not made: the run stops before the stage, its forecast the revision's.
func TestBudgetStopsARevisionPastIt(t *testing.T) {
	spec := strings.Replace(shaSpec, "deadline: 1h", "deadline: 2s", 1)
	spec = strings.Replace(spec, "iter_latency: {1: {mean: 1}}", "iter_latency: {1: {mean: 1}, 2: {mean: 0.9}}", 1) // faster, and dearer
	spec = strings.Replace(spec, "  price_per_hour: 3.6\n", "  price_per_hour: 3.6\n  billing: {minimum: 0s}\n", 1)
	h := newHarness(t, spec)
	h.cfg.Replan = true
	_, events, err := h.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var first *journal.Event
	for i, e := range events {
		if e.Ev == journal.EvReplan {
			first = &events[i]
			break
		}
	}
	if first == nil || first.After.Cost <= first.Before.Cost*1.01 {
		t.Fatalf("the setup wants a revision that costs more: %+v, before %+v, after %+v", first, first.Before, first.After)
	}
	budget := (first.Before.Cost + first.After.Cost) / 2
	h = newHarness(t, spec+fmt.Sprintf("budget: {max_cost_usd: %g, stop: true}\n", budget))
	h.cfg.Replan = true
	_, events, err = h.run(t, context.Background())
	var over *executor.BudgetError
	if !errors.As(err, &over) || over.Stage != first.Stage || over.Forecast <= budget {
		t.Fatalf("budget $%v between the plan's $%v and the revision's $%v: %v", budget, first.Before.Cost, first.After.Cost, err)
	}
	for _, e := range events {
		if e.Ev == journal.EvReplan {
			t.Fatalf("a revision past the budget was made: %+v", e)
		}
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the budget stop", h.provider.Held())
	}
}
