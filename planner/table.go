package planner

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// WriteTable writes the plan or prediction as tables a person reads: what `rubberband plan` and
// `simulate` print, and the dashboard's plan page shows. Stages are numbered from 1, as people
// count them (JSON keeps the index from 0); money and durations are package format's.
func (r *Report) WriteTable(w io.Writer) {
	if r.ASHA != nil {
		r.ASHA.WriteTable(w)
		return
	}
	q := 100 * r.DeadlineQuantile
	head := fmt.Sprintf("%s · planner %s", r.Experiment, r.Planner)
	if r.DeadlineS > 0 {
		head += fmt.Sprintf(" · deadline %s at p%.0f", format.Clock(r.DeadlineS), q)
	}
	fmt.Fprintf(w, "%s · %d samples, seed %d\n", head, r.Samples, r.Seed)
	node := r.Cluster.InstanceType
	if node == "" {
		node = "nodes"
	}
	if c := r.Cluster; len(c.InstanceTypes) > 0 || len(c.Markets) > 0 {
		var choices []string // "p3.8xlarge, p3.2xlarge", "on-demand or spot": those the spec offers
		if len(c.InstanceTypes) > 0 {
			choices = append(choices, strings.Join(c.InstanceTypes, ", "))
		}
		if len(c.Markets) > 0 {
			choices = append(choices, strings.Join(c.Markets, " or "))
		}
		fmt.Fprintf(w, "each stage on one of %s; default %s %s\n", strings.Join(choices, ", "), c.InstanceType, c.Market)
	}
	fmt.Fprintf(w, "%s: %s, %s/h %s, %s billing, up to %s\n\n", node, format.Plural(r.Cluster.GPUsPerNode, "GPU"),
		format.Money(r.Cluster.PricePerHour), r.Cluster.Market, r.Cluster.Billing, format.Plural(r.Cluster.MaxNodes, "node"))
	writeStages(w, r.Brackets, len(r.Brackets) > 1)
	fmt.Fprintln(w)
	writePrediction(w, "predicted", r.Predicted, r.DeadlineS > 0)
	if r.Unproven {
		fmt.Fprintf(w, "optimal    not proven: the search stopped after %d million partial plans; this is the cheapest plan it found\n", maxJointNodes/1_000_000)
	}
	if r.Search != nil {
		fmt.Fprintf(w, "search     %s\n", r.Search)
	}
	if b := r.BudgetUSD; b > 0 {
		verdict := "within it"
		if r.Predicted.Cost.Mean > b {
			verdict = "OVER BUDGET"
		}
		fmt.Fprintf(w, "budget     %s: the plan's mean cost %s is %s (p95 %s)\n", format.Money(b), format.Money(r.Predicted.Cost.Mean), verdict, format.Money(r.Predicted.Cost.P95))
	}
	if r.Static != nil {
		writePrediction(w, "static", r.Static.Predicted, r.DeadlineS > 0)
		nodes := 0
		for _, b := range r.Static.Brackets {
			nodes += b.Stages[0].Nodes
		}
		switch {
		case r.SavingPct != nil:
			fmt.Fprintf(w, "\nsaving vs the best static cluster (%s): %.1f%% (%s)\n", format.Plural(nodes, "node"), *r.SavingPct,
				format.Money(r.Static.Predicted.Cost.Mean-r.Predicted.Cost.Mean))
		case !r.Static.Feasible:
			fmt.Fprintf(w, "\nno static cluster meets the deadline (fastest: %s)\n", format.Plural(nodes, "node"))
		}
	}
	r.writeAlternatives(w)
	if r.DeadlineS > 0 && !r.Feasible {
		fmt.Fprintf(w, "\nDEADLINE MISSED: this plan finishes after %s in %.0f%% of simulated runs\n",
			format.Clock(r.DeadlineS), 100*r.Predicted.DeadlineMissProb)
	}
}

// writeAlternatives writes the best plans on fewer instance types or markets, beside the plan.
func (r *Report) writeAlternatives(w io.Writer) {
	if len(r.Alternatives) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, alt := range r.Alternatives {
		writePrediction(w, alt.Name, alt.Predicted, r.DeadlineS > 0)
	}
	fmt.Fprintln(w)
	for _, alt := range r.Alternatives {
		switch {
		case alt.SavingPct != nil:
			fmt.Fprintf(w, "saving vs the best plan %s: %.1f%% (%s)\n", alt.Name, *alt.SavingPct, format.Money(alt.Predicted.Cost.Mean-r.Predicted.Cost.Mean))
		case !alt.Feasible:
			fmt.Fprintf(w, "no plan %s meets the deadline\n", alt.Name)
		}
	}
}

func writeStages(w io.Writer, brackets []BracketReport, named bool) {
	cols := []string{"STAGE", "TRIALS", "ITERS", "GPUS", "GPUS/TRIAL", "NODES", "WAVES", "START", "TIME", "COST"}
	spot, typed, hedged := false, false, false // columns of expected interruptions, of each stage's type and market, and of its nodes on demand, when the plan has them
	for _, b := range brackets {
		for _, s := range b.Stages {
			spot = spot || s.Interruptions > 0
			typed = typed || s.Type != "" || s.Market != ""
			hedged = hedged || s.OnDemandNodes > 0
		}
	}
	if typed {
		cols = append(cols[:4], append([]string{"TYPE", "MARKET"}, cols[4:]...)...)
	}
	if hedged { // after NODES: how many of them are on demand, the rest on spot
		i := slices.Index(cols, "NODES") + 1
		cols = append(cols[:i], append([]string{"ON-DEMAND"}, cols[i:]...)...)
	}
	if spot {
		cols = append(cols, "INTERRUPTIONS", "THEIR COST")
	}
	if named {
		cols = append([]string{"BRACKET"}, cols...)
	}
	tw := format.NewTable(w, cols...)
	for _, b := range brackets {
		for k, s := range b.Stages {
			row := []any{k + 1, s.Trials, s.Iters, s.GPUs}
			if typed {
				row = append(row, s.Type, s.Market)
			}
			row = append(row, s.GPUsPerTrial, s.Nodes)
			if hedged {
				row = append(row, onDemandNodes(s))
			}
			row = append(row, s.Waves, format.Clock(s.Start), format.Clock(s.Duration), format.Money(s.Cost))
			if spot {
				row = append(row, fmt.Sprintf("%.2f", s.Interruptions), format.Money(s.InterruptionCost))
			}
			if named {
				row = append([]any{b.Name}, row...)
			}
			tw.Row(row...)
		}
	}
	tw.Flush()
}

func writePrediction(w io.Writer, label string, p Prediction, deadline bool) {
	line := fmt.Sprintf("%-10s JCT %s mean, %s p50, %s p95 (±%s)   cost %s mean, %s p50, %s p95",
		label, format.Clock(p.JCT.Mean), format.Clock(p.JCT.P50), format.Clock(p.JCT.P95), format.Clock(p.JCT.Std),
		format.Money(p.Cost.Mean), format.Money(p.Cost.P50), format.Money(p.Cost.P95))
	if deadline {
		line += fmt.Sprintf("   P(miss) %.0f%%", 100*p.DeadlineMissProb)
	}
	fmt.Fprintln(w, line)
}

// onDemandNodes is how many of a stage's nodes are on demand: a hedged stage's on-demand ones,
// every node of a stage on demand, none on spot.
func onDemandNodes(s sim.StageResult) int {
	switch {
	case s.OnDemandNodes > 0:
		return s.OnDemandNodes
	case s.Market == spec.MarketSpot:
		return 0
	default:
		return s.Nodes
	}
}
