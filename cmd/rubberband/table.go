package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/rubberband-hpo/rubberband/planner"
)

// printReport writes a plan or prediction as tables a person reads.
func printReport(w io.Writer, r *planner.Report) {
	q := 100 * r.DeadlineQuantile
	head := fmt.Sprintf("%s · planner %s", r.Experiment, r.Planner)
	if r.DeadlineS > 0 {
		head += fmt.Sprintf(" · deadline %s at p%.0f", clock(r.DeadlineS), q)
	}
	fmt.Fprintf(w, "%s · %d samples, seed %d\n", head, r.Samples, r.Seed)
	node := r.Cluster.InstanceType
	if node == "" {
		node = "nodes"
	}
	if c := r.Cluster; len(c.InstanceTypes) > 0 || len(c.Markets) > 0 {
		fmt.Fprintf(w, "each stage on one of %s, %s; default %s %s\n", strings.Join(append([]string(nil), c.InstanceTypes...), ", "),
			strings.Join(append([]string(nil), c.Markets...), " or "), c.InstanceType, c.Market)
	}
	fmt.Fprintf(w, "%s: %d GPUs, $%.4g/h %s, %s billing, up to %d nodes\n\n",
		node, r.Cluster.GPUsPerNode, r.Cluster.PricePerHour, r.Cluster.Market, r.Cluster.Billing, r.Cluster.MaxNodes)
	printStages(w, r.Brackets, len(r.Brackets) > 1)
	fmt.Fprintln(w)
	printPrediction(w, "predicted", r.Predicted, r.DeadlineS > 0)
	if b := r.BudgetUSD; b > 0 {
		verdict := "within it"
		if r.Predicted.Cost.Mean > b {
			verdict = "OVER BUDGET"
		}
		fmt.Fprintf(w, "budget     %s: the plan's mean cost %s is %s (p95 %s)\n", money(b), money(r.Predicted.Cost.Mean), verdict, money(r.Predicted.Cost.P95))
	}
	if r.Static != nil {
		printPrediction(w, "static", r.Static.Predicted, r.DeadlineS > 0)
		nodes := 0
		for _, b := range r.Static.Brackets {
			nodes += b.Stages[0].Nodes
		}
		switch {
		case r.SavingPct != nil:
			fmt.Fprintf(w, "\nsaving vs the best static cluster (%s): %.1f%% ($%.2f)\n", plural(nodes, "node"), *r.SavingPct,
				r.Static.Predicted.Cost.Mean-r.Predicted.Cost.Mean)
		case !r.Static.Feasible:
			fmt.Fprintf(w, "\nno static cluster meets the deadline (fastest: %s)\n", plural(nodes, "node"))
		}
	}
	printAlternatives(w, r)
	if r.DeadlineS > 0 && !r.Feasible {
		fmt.Fprintf(w, "\nDEADLINE MISSED: this plan finishes after %s in %.0f%% of simulated runs\n",
			clock(r.DeadlineS), 100*r.Predicted.DeadlineMissProb)
	}
}

// printAlternatives writes the best plans on fewer instance types or markets, beside the plan.
func printAlternatives(w io.Writer, r *planner.Report) {
	if len(r.Alternatives) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, alt := range r.Alternatives {
		printPrediction(w, alt.Name, alt.Predicted, r.DeadlineS > 0)
	}
	fmt.Fprintln(w)
	for _, alt := range r.Alternatives {
		switch {
		case alt.SavingPct != nil:
			fmt.Fprintf(w, "saving vs the best plan %s: %.1f%% ($%.2f)\n", alt.Name, *alt.SavingPct, alt.Predicted.Cost.Mean-r.Predicted.Cost.Mean)
		case !alt.Feasible:
			fmt.Fprintf(w, "no plan %s meets the deadline\n", alt.Name)
		}
	}
}

func printStages(w io.Writer, brackets []planner.BracketReport, named bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"STAGE", "TRIALS", "ITERS", "GPUS", "GPUS/TRIAL", "NODES", "WAVES", "START", "TIME", "COST"}
	spot, typed := false, false // columns of expected interruptions and of each stage's type and market, when the model has them
	for _, b := range brackets {
		for _, s := range b.Stages {
			spot = spot || s.Interruptions > 0
			typed = typed || s.Type != "" || s.Market != ""
		}
	}
	if typed {
		cols = append(cols[:4], append([]string{"TYPE", "MARKET"}, cols[4:]...)...)
	}
	if spot {
		cols = append(cols, "INTERRUPTIONS", "THEIR COST")
	}
	cols = append(cols, "")
	if named {
		cols = append([]string{"BRACKET"}, cols...)
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, b := range brackets {
		for k, s := range b.Stages {
			row := []string{fmt.Sprint(k), fmt.Sprint(s.Trials), fmt.Sprint(s.Iters), fmt.Sprint(s.GPUs)}
			if typed {
				row = append(row, s.Type, s.Market)
			}
			row = append(row, fmt.Sprint(s.GPUsPerTrial), fmt.Sprint(s.Nodes), fmt.Sprint(s.Waves), clock(s.Start),
				clock(s.Duration), fmt.Sprintf("$%.2f", s.Cost))
			if spot {
				row = append(row, fmt.Sprintf("%.2f", s.Interruptions), fmt.Sprintf("$%.2f", s.InterruptionCost))
			}
			row = append(row, "")
			if named {
				row = append([]string{b.Name}, row...)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	tw.Flush()
}

func printPrediction(w io.Writer, label string, p planner.Prediction, deadline bool) {
	line := fmt.Sprintf("%-10s JCT %s mean, %s p50, %s p95 (±%s)   cost $%.2f mean, $%.2f p50, $%.2f p95",
		label, clock(p.JCT.Mean), clock(p.JCT.P50), clock(p.JCT.P95), clock(p.JCT.Std), p.Cost.Mean, p.Cost.P50, p.Cost.P95)
	if deadline {
		line += fmt.Sprintf("   P(miss) %.0f%%", 100*p.DeadlineMissProb)
	}
	fmt.Fprintln(w, line)
}

// clock formats seconds as 12.3s, m:ss or h:mm:ss.
func clock(s float64) string {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return "∞"
	}
	if s < 60 {
		return fmt.Sprintf("%.1fs", s) // short jobs: tenths matter
	}
	t := int(math.Round(s))
	if t >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", t/3600, t/60%60, t%60)
	}
	return fmt.Sprintf("%d:%02d", t/60, t%60)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// money formats dollars with cents, or with four decimals below a dollar.
func money(x float64) string {
	if math.Abs(x) < 1 {
		return fmt.Sprintf("$%.4f", x)
	}
	return fmt.Sprintf("$%.2f", x)
}
