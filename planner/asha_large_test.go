package planner

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// fig11ASHA is fig11Job's job as ASHA, planned at a deadline (p50) on samples: issue 39's ASHA
// scale job.
func fig11ASHA(t testing.TB, trials, maxIters, maxNodes, samples int, deadline string) (*spec.Experiment, *sim.Model) {
	t.Helper()
	src := strings.Replace(fig11Job(trials, maxIters, maxNodes), "{sha:", "{asha:", 1) +
		fmt.Sprintf("deadline: %s\nplanner: {samples: %d, deadline_quantile: 0.5}\n", deadline, samples)
	return parseModel(t, src)
}

// The fixed-count sweep's floor (fixedFloor) changes no plan: against the sweep of every
// count, the same elastic and fixed schedules at the same predicted cost, from fewer
// simulations, on the Fig. 11 ASHA job at a loose deadline (one node is best), a tight one
// (some 20 nodes) and one no count meets (the fastest kept).
func TestFixedFloorKeepsThePlan(t *testing.T) {
	for _, tc := range []struct {
		trials, maxIters int
		deadline         string
	}{{256, 729, "6h"}, {243, 81, "7m"}, {243, 81, "5m"}} {
		t.Run(fmt.Sprintf("%d trials, %s", tc.trials, tc.deadline), func(t *testing.T) {
			exp, m := fig11ASHA(t, tc.trials, tc.maxIters, 64, 8, tc.deadline)
			p, best, fixed, err := searchASHA(context.Background(), exp, m, false)
			if err != nil {
				t.Fatal(err)
			}
			every := &ashaProblem{m: m, cfg: p.cfg, samples: p.samples, seed: p.seed, deadline: p.deadline, quantile: p.quantile,
				cache: map[string]ASHACandidate{}, jcts: map[string][]float64{}, stop: func() bool { return false }, everyCount: true}
			wantBest, wantFixed, err := every.search()
			if err != nil {
				t.Fatal(err)
			}
			if best.Plan.String() != wantBest.Plan.String() || best.Cost.Mean != wantBest.Cost.Mean ||
				fixed.Plan.String() != wantFixed.Plan.String() || fixed.Cost.Mean != wantFixed.Cost.Mean {
				t.Fatalf("with the floor: %v $%.4f, fixed %v $%.4f; every count: %v $%.4f, fixed %v $%.4f",
					best.Plan, best.Cost.Mean, fixed.Plan, fixed.Cost.Mean, wantBest.Plan, wantBest.Cost.Mean, wantFixed.Plan, wantFixed.Cost.Mean)
			}
			if tc.deadline == "6h" && p.evaluated >= every.evaluated {
				t.Fatalf("the floor simulated %d schedules, every count %d", p.evaluated, every.evaluated)
			}
		})
	}
}

// A large job's search (a screen of the samples, node counts on a grid an eighth apart, fixed
// counts from a galloping search, one descent, the picks priced on all samples), forced on
// small jobs, against the plain search: as feasible, within 5% of its cost where the deadline
// can be met, as fast where it cannot, from fewer simulations.
func TestLargeASHAAgainstPlain(t *testing.T) {
	for _, tc := range []struct {
		trials, samples int
		deadline        string
	}{{243, 8, "7m"}, {256, 10, "6m"}, {243, 8, "5m"}} {
		t.Run(fmt.Sprintf("%d trials, %s", tc.trials, tc.deadline), func(t *testing.T) {
			exp, m := fig11ASHA(t, tc.trials, 81, 64, tc.samples, tc.deadline)
			plain, want, _, err := searchASHA(context.Background(), exp, m, false)
			if err != nil {
				t.Fatal(err)
			}
			large, got, _, err := searchASHA(context.Background(), exp, m, true)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("plain %v $%.3f p50 %.0f s (%d simulated); large %v $%.3f p50 %.0f s (%d)", want.Plan, want.Cost.Mean, want.quantile, plain.evaluated, got.Plan, got.Cost.Mean, got.quantile, large.evaluated)
			switch {
			case got.Feasible != want.Feasible:
				t.Fatalf("large search feasible %v, plain %v", got.Feasible, want.Feasible)
			case want.Feasible && got.Cost.Mean > 1.05*want.Cost.Mean:
				t.Fatalf("large search $%.3f, %.1f%% dearer than plain's $%.3f", got.Cost.Mean, 100*(got.Cost.Mean/want.Cost.Mean-1), want.Cost.Mean)
			case !want.Feasible && got.quantile > 1.01*want.quantile:
				t.Fatalf("none meets the deadline: large search's p50 %.0f s, plain's %.0f s", got.quantile, want.quantile)
			case large.evaluated >= plain.evaluated:
				t.Fatalf("large search simulated %d schedules, plain %d", large.evaluated, plain.evaluated)
			}
		})
	}
}

// BenchmarkPlanASHAScale plans issue 39's ASHA job (the Fig. 11 profile, 1 to 729 iterations,
// a 6 h deadline at p50, up to 256 p3.8xlarge nodes, 100 samples) at 1,024 to 32,768 trials,
// and reports the milliseconds a plan takes, the schedules it simulated, and its predicted cost.
func BenchmarkPlanASHAScale(b *testing.B) {
	for _, trials := range []int{1024, 4096, 32768} {
		b.Run(fmt.Sprintf("trials=%d", trials), func(b *testing.B) {
			exp, m := fig11ASHA(b, trials, 729, 256, 100, "6h")
			for b.Loop() {
				p, best, _, err := searchASHA(context.Background(), exp, m, trials > LargeASHATrials)
				if err != nil || !best.Feasible {
					b.Fatalf("feasible %v, %v", best.Feasible, err)
				}
				b.ReportMetric(float64(p.evaluated), "plans/op")
				b.ReportMetric(best.Cost.Mean, "usd")
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
		})
	}
}

// BenchmarkReplanASHAScale re-plans issue 39's ASHA job (BenchmarkPlanASHAScale's) at 4,096 and
// 32,768 trials where the executor's first-phase reviews see it: a quarter and three quarters of
// its trials started on its plan's first phase, as far into the deadline as into the plan's
// time, and reports the milliseconds a review takes. plain=1 is the plain search's (what
// ReplanASHA did at every size before large jobs got PlanASHA's search), at 4,096 trials only.
func BenchmarkReplanASHAScale(b *testing.B) {
	for _, trials := range []int{4096, 32768} {
		b.Run(fmt.Sprintf("trials=%d", trials), func(b *testing.B) { benchmarkReplanASHA(b, trials) })
	}
}

func benchmarkReplanASHA(b *testing.B, trials int) {
	exp, m := fig11ASHA(b, trials, 729, 256, 100, "6h")
	cfg, rules := *exp.Algorithm.ASHA, DefaultReplanRules(exp)
	_, plan, _, err := searchASHA(context.Background(), exp, m, trials > LargeASHATrials)
	if err != nil {
		b.Fatal(err)
	}
	for _, quarters := range []int{1, 3} {
		for _, plain := range []bool{false, true} {
			if plain && trials > 4096 {
				continue
			}
			b.Run(fmt.Sprintf("started=%d-4/plain=%v", quarters, plain), func(b *testing.B) {
				frac := float64(quarters) / 4
				now := ASHAPresent{Start: playLadder(b, m, cfg, plan.Plan.GPUs[0], trials*quarters/4), Plan: plan.Plan,
					Elapsed: frac * plan.quantile, Spent: frac * plan.Cost.Mean}
				screen := screenSamples(rules.Samples, trialsLeft(cfg, &now.Start))
				if plain {
					screen = 0
				}
				for b.Loop() {
					rev, err := replanASHA(m, cfg, now, rules, screen)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(rev.After.Cost, "usd")
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
			})
		}
	}
}
