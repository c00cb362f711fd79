package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/urfave/cli/v2"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "find the cheapest allocation plan that meets the deadline",
		ArgsUsage: "SPEC",
		Flags: append(predictionFlags(),
			&cli.StringFlag{Name: "planner", DefaultText: "from the spec", Usage: "static, naive-elastic, greedy or optimal (overrides planner.name)"},
			&cli.StringFlag{Name: "out", Usage: "write the plan as JSON to this file (for simulate --plan and run --plan)"},
			&cli.StringFlag{Name: "gantt", Usage: "draw the plan's cluster schedule (FILE.png or FILE.svg)"},
		),
		Action: planAction,
	}
}

func planAction(c *cli.Context) error {
	exp, s, err := prepare(c)
	if err != nil {
		return err
	}
	rep, res, err := makePlan(c, exp, s)
	if err != nil {
		return err
	}
	if g := c.String("gantt"); g != "" {
		if err := drawGantt(g, s, res.Best.Alloc, fmt.Sprintf("%s: %s plan, one sampled run", exp.Name, exp.Planner.Name)); err != nil {
			return err
		}
	}
	if out := c.String("out"); out != "" && res.Feasible {
		var buf bytes.Buffer
		if err := writeJSON(&buf, rep); err != nil {
			return err
		}
		if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write plan: %w", err)
		}
	}
	if c.String("output") == "json" {
		if err := writeJSON(c.App.Writer, rep); err != nil {
			return err
		}
	} else {
		printReport(c.App.Writer, rep)
	}
	if !res.Feasible {
		return infeasible(exp, res)
	}
	return overBudget(exp, rep)
}

// makePlan runs the spec's planner, with progress, and reports its plan beside the cheapest
// static cluster's: what plan prints and run executes.
func makePlan(c *cli.Context, exp *spec.Experiment, s *sim.Simulator) (*planner.Report, *planner.Result, error) {
	progress := c.App.ErrWriter
	if c.String("log-format") == "json" { // run's standard error holds JSON lines only
		progress = io.Discard
	}
	return planWith(context.Background(), exp, s, progress)
}

// planWith is makePlan with its progress written to progress: what the dashboard's plan page
// calls too.
func planWith(ctx context.Context, exp *spec.Experiment, s *sim.Simulator, progress io.Writer) (*planner.Report, *planner.Result, error) {
	prob, err := planner.NewProblem(s, exp.Deadline.Seconds(), exp.Planner.DeadlineQuantile)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	prob.Stop = func() bool { return ctx.Err() != nil } // the dashboard's browser gone: stop now
	done := showProgress(progress, prob)
	res, err := planner.Run(prob, exp.Planner.Name)
	done()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, nil, err
	}
	if res.Best.Alloc == nil {
		return nil, nil, &exitErr{code: exitInfeasible, err: fmt.Errorf("no plan fits max_nodes %d", exp.Cluster.MaxNodes)}
	}
	static := res
	if exp.Planner.Name != spec.PlannerStatic {
		static = planner.Static(prob)
	}
	predicted, err := s.Simulate(res.Best.Alloc)
	if err != nil {
		return nil, nil, err
	}
	rep := planner.NewReport(exp, exp.Planner.Name, exp.Deadline.Seconds(), res.Feasible, predicted)
	rep.Evaluated = res.Evaluated
	if static.Best.Alloc != nil {
		sp, err := s.Simulate(static.Best.Alloc)
		if err != nil {
			return nil, nil, err
		}
		rep.SetStatic(static.Feasible, sp)
	}
	subsets, alts, err := planner.Alternatives(prob, exp.Planner.Name)
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
	return rep, &res, nil
}

// overBudget refuses a plan whose predicted mean cost is over the spec's budget, with both.
func overBudget(exp *spec.Experiment, rep *planner.Report) error {
	if b := exp.Budget.MaxCostUSD; b > 0 && rep.Predicted.Cost.Mean > b {
		return &exitErr{code: exitInfeasible, err: fmt.Errorf("over budget: the %s plan, the cheapest it found that meets the deadline %s at p%.0f, costs %s (mean); the budget is %s (budget.max_cost_usd)",
			rep.Planner, exp.Deadline.D(), 100*exp.Planner.DeadlineQuantile, money(rep.Predicted.Cost.Mean), money(b))}
	}
	return nil
}

func infeasible(exp *spec.Experiment, res *planner.Result) error {
	return &exitErr{code: exitInfeasible, err: fmt.Errorf("no plan meets the deadline %s at p%.0f: the fastest plan found takes %s (p%.0f)",
		exp.Deadline.D(), 100*exp.Planner.DeadlineQuantile, clock(res.Best.JCT), 100*exp.Planner.DeadlineQuantile)}
}
