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
	Reason string `json:"reason"` // "budget", "quota" or "queue"
	// PredictedCostUSD is the plan's cost at its quantile; RemainingBudgetUSD what is left of the
	// team's month after what it was charged and what its active runs still reserve.
	PredictedCostUSD   float64 `json:"predicted_cost_usd,omitempty"`
	RemainingBudgetUSD float64 `json:"remaining_budget_usd,omitempty"`
	// BudgetUSD is the team's monthly budget and SpentUSD what it was charged this month: the
	// rest of the budget less RemainingBudgetUSD is what its active runs reserve.
	BudgetUSD float64 `json:"budget_usd,omitempty"`
	SpentUSD  float64 `json:"spent_usd,omitempty"`
	GPUs      int     `json:"gpus,omitempty"`
	MaxGPUs   int     `json:"max_gpus,omitempty"`
	Nodes     int     `json:"nodes,omitempty"`
	MaxNodes  int     `json:"max_nodes,omitempty"`
	// Queued and MaxQueued are the runs QueuedBy (a user's name, or the team's) has queued and
	// may queue, for a "queue" refusal.
	Queued    int    `json:"queued,omitempty"`
	MaxQueued int    `json:"max_queued,omitempty"`
	QueuedBy  string `json:"queued_by,omitempty"`
	Team      string `json:"team"`
}

func (r *Refusal) Error() string {
	switch r.Reason {
	case "budget":
		return fmt.Sprintf("refused: the plan's predicted cost %s (at its deadline quantile) is over team %s's remaining budget this month, %s (of its monthly %s: %s charged, %s reserved by its active runs)",
			format.Money(r.PredictedCostUSD), r.Team, format.Money(r.RemainingBudgetUSD), format.Money(r.BudgetUSD), format.Money(r.SpentUSD),
			format.Money(max(0, r.BudgetUSD-r.SpentUSD-r.RemainingBudgetUSD)))
	case "queue":
		return fmt.Sprintf("refused: %s has %d runs queued, the most it may (team %s): wait for one to start, or cancel one",
			r.QueuedBy, r.Queued, r.Team)
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

// QueueLimits bound the runs waiting in a team's queue: PerTeam (a team's MaxQueuedRuns
// overrides it) and PerUser; 0 is no bound.
type QueueLimits struct {
	PerTeam, PerUser int
}

// The server's queue limits unless its flags say otherwise.
const (
	DefaultMaxQueuedPerTeam = 100
	DefaultMaxQueuedPerUser = 20
)

// Admit says whether user's plan may join its team's queue (nil) or is refused (a *Refusal),
// on the team's ledger read under its lock: its peak must fit the team's quotas at all, or it
// could never start; its reservation (cost at the deadline's quantile) must fit what is left of
// the team's monthly budget (Remaining); and neither user nor team may have more runs queued
// than limits allow.
func Admit(l store.Ledger, user string, d Demand, limits QueueLimits) error {
	team := l.Team
	if !fitsQuotas(team, d.GPUs, d.Nodes) {
		return &Refusal{Reason: "quota", Team: team.Name, GPUs: d.GPUs, MaxGPUs: team.MaxGPUs, Nodes: d.Nodes, MaxNodes: team.MaxNodes}
	}
	if team.MonthlyBudgetUSD > 0 {
		if remaining := Remaining(l); d.CostUSD > remaining {
			return &Refusal{Reason: "budget", Team: team.Name, PredictedCostUSD: d.CostUSD, RemainingBudgetUSD: max(remaining, 0),
				BudgetUSD: team.MonthlyBudgetUSD, SpentUSD: l.Spent}
		}
	}
	perTeam := limits.PerTeam
	if team.MaxQueuedRuns > 0 {
		perTeam = team.MaxQueuedRuns
	}
	queued, mine := 0, 0
	for _, r := range l.Active {
		if r.State == store.Queued {
			queued++
			if r.User == user {
				mine++
			}
		}
	}
	switch {
	case limits.PerUser > 0 && mine >= limits.PerUser:
		return &Refusal{Reason: "queue", Team: team.Name, QueuedBy: user, Queued: mine, MaxQueued: limits.PerUser}
	case perTeam > 0 && queued >= perTeam:
		return &Refusal{Reason: "queue", Team: team.Name, QueuedBy: "team " + team.Name, Queued: queued, MaxQueued: perTeam}
	}
	return nil
}

// Reservation is what a run still holds of its team's budget: its predicted cost at the
// quantile less what it was charged so far (its metered cost; nothing once the meter has
// passed the prediction, the charges then count in full). A run's reservation is released when
// it ends: what it was charged stays.
func Reservation(r store.Run) float64 { return max(0, r.PredictedCostUSD-r.CostUSD) }

// Remaining is what is left of the team's monthly budget in the ledger: the budget less what
// it was charged this month and what its active (queued, running and paused) runs reserve. It may be
// negative: a lowered budget, or runs metered past their predictions.
func Remaining(l store.Ledger) float64 {
	remaining := l.Team.MonthlyBudgetUSD - l.Spent
	for _, r := range l.Active {
		remaining -= Reservation(r)
	}
	return remaining
}

// fitsQuotas says whether gpus on nodes fit the team's quotas.
func fitsQuotas(team store.Team, gpus, nodes int) bool {
	return (team.MaxGPUs == 0 || gpus <= team.MaxGPUs) && (team.MaxNodes == 0 || nodes <= team.MaxNodes)
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
