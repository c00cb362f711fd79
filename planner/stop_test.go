package planner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Stop ends a planning within moments: once it says so, no plan is simulated any more. On the
// three-type Fig. 12 job, whose optimal planning weighs thousands of plans over seconds, every
// planner stopped after 5 plans has simulated exactly 5; Compare with a context that ends says
// so.
func TestStopEndsPlanningAtOnce(t *testing.T) {
	exp, m := loadModel(t, "../examples/paper/fig12-types.yaml")
	for _, name := range []string{spec.PlannerStatic, spec.PlannerGreedy, spec.PlannerOptimal} {
		p, err := NewProblem(sim.New(m, exp.Algorithm.Brackets(), 20, exp.Seed), exp.Deadline.Seconds(), 0.5)
		if err != nil {
			t.Fatal(err)
		}
		simulated := 0
		p.Progress = func(n int) { simulated = n }
		p.Stop = func() bool { return simulated >= 5 }
		start := time.Now()
		res, err := Run(p, name)
		if err != nil {
			t.Fatal(err)
		}
		if simulated != 5 || res.Evaluated != 5 || time.Since(start) > 2*time.Second {
			t.Fatalf("%s: %d plans simulated (%d evaluated) in %v after the stop at 5", name, simulated, res.Evaluated, time.Since(start))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compare(ctx, exp, spec.PlannerNames()); !errors.Is(err, context.Canceled) {
		t.Fatalf("compare with an ended context: %v", err)
	}
}
