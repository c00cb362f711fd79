package server

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Demand is what a planned run asks of its team: its cost at the deadline's quantile, and the
// GPUs and nodes its plan holds at its peak.
type Demand struct {
	CostUSD     float64
	GPUs, Nodes int
}

// Refusal is a submission refused before it is queued, with the figures that decided it.
type Refusal struct {
	Reason string `json:"reason"` // "budget" or "quota"
	// PredictedCostUSD is the plan's cost at its quantile; RemainingBudgetUSD what is left of the
	// team's month after what it was charged and what its active runs are still predicted to cost.
	PredictedCostUSD   float64 `json:"predicted_cost_usd,omitempty"`
	RemainingBudgetUSD float64 `json:"remaining_budget_usd,omitempty"`
	GPUs               int     `json:"gpus,omitempty"`
	MaxGPUs            int     `json:"max_gpus,omitempty"`
	Nodes              int     `json:"nodes,omitempty"`
	MaxNodes           int     `json:"max_nodes,omitempty"`
	Team               string  `json:"team"`
}

func (r *Refusal) Error() string {
	switch r.Reason {
	case "budget":
		return fmt.Sprintf("refused: the plan's predicted cost %s (at its deadline quantile) is over team %s's remaining budget this month, %s",
			format.Money(r.PredictedCostUSD), r.Team, format.Money(r.RemainingBudgetUSD))
	default:
		return fmt.Sprintf("refused: the plan holds up to %d GPUs on %d nodes; team %s may hold %s GPUs and %s nodes at once",
			r.GPUs, r.Nodes, r.Team, limit(r.MaxGPUs), limit(r.MaxNodes))
	}
}

func limit(n int) string {
	if n == 0 {
		return "any number of"
	}
	return fmt.Sprint(n)
}

// Admit says whether a plan may join its team's queue (nil) or is refused (a *Refusal): its
// cost at the deadline's quantile must fit what is left of the team's monthly budget once what
// it was charged this month (spent) and what its active (queued and running) runs are still
// predicted to cost are set aside; and its peak must fit the team's quotas at all, or it could
// never start.
func Admit(team store.Team, spent float64, active []store.Run, d Demand) error {
	if (team.MaxGPUs > 0 && d.GPUs > team.MaxGPUs) || (team.MaxNodes > 0 && d.Nodes > team.MaxNodes) {
		return &Refusal{Reason: "quota", Team: team.Name, GPUs: d.GPUs, MaxGPUs: team.MaxGPUs, Nodes: d.Nodes, MaxNodes: team.MaxNodes}
	}
	if team.MonthlyBudgetUSD > 0 {
		remaining := team.MonthlyBudgetUSD - spent
		for _, r := range active {
			remaining -= max(0, r.PredictedCostUSD-r.CostUSD)
		}
		if d.CostUSD > remaining {
			return &Refusal{Reason: "budget", Team: team.Name, PredictedCostUSD: d.CostUSD, RemainingBudgetUSD: max(remaining, 0)}
		}
	}
	return nil
}

// DemandOf is what a plan report asks: its cost at the deadline's quantile (the mean where the
// report has none, as an ASHA plan's) and its peak GPUs and nodes (brackets of one round add up,
// rounds follow one another; an ASHA schedule's widest step).
func DemandOf(rep *planner.Report, exp *spec.Experiment) (Demand, error) {
	d := Demand{CostUSD: rep.CostAtQuantileUSD}
	if d.CostUSD == 0 {
		d.CostUSD = rep.Predicted.Cost.Mean
	}
	if rep.ASHA != nil {
		for _, g := range rep.ASHA.Elastic.Plan.GPUs {
			d.GPUs = max(d.GPUs, g)
		}
		d.Nodes = (d.GPUs + exp.Cluster.GPUsPerNode - 1) / max(exp.Cluster.GPUsPerNode, 1)
		return d, nil
	}
	brackets := exp.Algorithm.Brackets()
	a, err := rep.Alloc(brackets)
	if err != nil {
		return Demand{}, err
	}
	d.Nodes = a.PeakNodesByRound(brackets)
	gpus := map[int]int{}
	for b, stages := range a {
		peak := 0
		for _, sa := range stages {
			peak = max(peak, sa.GPUs)
		}
		gpus[brackets[b].Round] += peak
	}
	for _, g := range gpus {
		d.GPUs = max(d.GPUs, g)
	}
	return d, nil
}
