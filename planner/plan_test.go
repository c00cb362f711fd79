package planner

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Plan reports the spec's planner's plan beside the best static cluster's, reports its
// progress, and says why a job cannot be planned: too big (ProblemError), a deadline no plan
// meets (Check: ErrInfeasible), a budget the plan is over (CheckBudget), an ended context.
func TestPlan(t *testing.T) {
	exp, err := spec.Load("../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.For(exp)
	if err != nil {
		t.Fatal(err)
	}
	evaluated := 0
	rep, res, err := Plan(context.Background(), exp, s, func(n int) { evaluated = n })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Feasible || rep.Static == nil || rep.SavingPct == nil || evaluated != res.Evaluated || evaluated == 0 || res.Check(exp) != nil {
		t.Fatalf("plan: feasible %v, static %v, %d plans told of %d", res.Feasible, rep.Static != nil, evaluated, res.Evaluated)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"quickstart · planner greedy", "nodes: 8 GPUs, $24.48/h on-demand", "up to 8 nodes", "\n      1  ", "saving vs the best static cluster"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "\n      0  ") {
		t.Errorf("a stage numbered 0:\n%s", table.String())
	}
	if err := CheckBudget(exp, rep); err != nil {
		t.Errorf("no budget: %v", err)
	}
	tight := *exp
	tight.Budget.MaxCostUSD = rep.Predicted.Cost.Mean / 2
	if err := CheckBudget(&tight, rep); !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "over budget") {
		t.Errorf("over budget: %v", err)
	}
	tight = *exp
	tight.Deadline = spec.Duration(time.Second)
	if _, res, err := Plan(context.Background(), &tight, s, nil); err != nil || !errors.Is(res.Check(&tight), ErrInfeasible) {
		t.Errorf("a deadline of 1s: %v, %v", err, res.Check(&tight))
	}
	tight = *exp
	tight.Deadline = 0
	var problem *ProblemError
	if _, _, err := Plan(context.Background(), &tight, s, nil); !errors.As(err, &problem) {
		t.Errorf("no deadline: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Plan(ctx, exp, s, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v", err)
	}
}
