package planner

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// shaRunJob is a small SHA job that meets its ten minutes on two 2-GPU nodes.
const shaRunJob = `
name: t
deadline: 10m
seed: 5
objective: {metric: score, mode: max}
algorithm: {sha: {trials: 4, min_iters: 1, max_iters: 3, eta: 2}}
cluster: {gpus_per_node: 2, price_per_hour: 6, billing: {minimum: 0s}, scale_latency: {value: 2s}, init_latency: {value: 1s}, max_nodes: 2}
profile: {iter_latency: {1: {mean: 2, std: 0.1}, 2: {mean: 1.2, std: 0.1}}, startup_latency: {value: 1s}}
planner: {samples: 30}
`

// PlanRun plans SHA with the spec's planner and ASHA as a GPU schedule, and refuses, matching
// ErrInfeasible, a plan past the deadline or over the budget, for both.
func TestPlanRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, job, change string
		planner           string
		deadline, budget  bool // the error wanted: a DeadlineError, a BudgetError
	}{
		{name: "sha", job: shaRunJob, planner: "greedy"},
		{name: "sha past its deadline", job: shaRunJob, change: "deadline: 1s", deadline: true},
		{name: "sha over its budget", job: shaRunJob, change: "budget: {max_cost_usd: 0.001}", budget: true},
		{name: "asha", job: ashaReplanJob, planner: "asha"},
		{name: "asha past its deadline", job: ashaReplanJob, change: "deadline: 1s", deadline: true},
		{name: "asha over its budget", job: ashaReplanJob, change: "budget: {max_cost_usd: 0.001}", budget: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := tc.job
			if strings.HasPrefix(tc.change, "deadline:") {
				job = strings.Replace(job, "\ndeadline: ", "\n# was: ", 1)
			}
			exp, err := spec.Parse("t.yaml", []byte(job+tc.change+"\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := sim.For(exp)
			if err != nil {
				t.Fatal(err)
			}
			var evaluated atomic.Int64
			rep, err := PlanRun(context.Background(), exp, s, func(n int) { evaluated.Store(int64(n)) })
			var de *DeadlineError
			var be *BudgetError
			switch {
			case tc.deadline:
				if !errors.As(err, &de) || !errors.Is(err, ErrInfeasible) || rep != nil {
					t.Fatalf("%v, %v: want a DeadlineError", rep, err)
				}
			case tc.budget:
				if !errors.As(err, &be) || !errors.Is(err, ErrInfeasible) || rep != nil {
					t.Fatalf("%v, %v: want a BudgetError", rep, err)
				}
			case err != nil:
				t.Fatal(err)
			case rep.Planner != tc.planner || !rep.Feasible:
				t.Errorf("planner %q, feasible %v: want %q, feasible", rep.Planner, rep.Feasible, tc.planner)
			case tc.planner != "asha" && evaluated.Load() == 0:
				t.Error("the planner's progress was never told")
			}
		})
	}
}
