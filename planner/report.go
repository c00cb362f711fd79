package planner

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Report is a plan with its prediction: what `rubberband plan -o json` prints, what --out
// writes, and what `rubberband simulate --plan` and `rubberband run --plan` read back.
type Report struct {
	Experiment       string          `json:"experiment"`
	Planner          string          `json:"planner"`
	DeadlineS        float64         `json:"deadline_s"`
	DeadlineQuantile float64         `json:"deadline_quantile"`
	Samples          int             `json:"samples"`
	Seed             int64           `json:"seed"`
	Feasible         bool            `json:"feasible"`
	Cluster          ClusterInfo     `json:"cluster"`
	Brackets         []BracketReport `json:"brackets"`
	Predicted        Prediction      `json:"predicted"`
	// CostAtQuantileUSD is the plan's cost at the deadline's quantile (the share of simulated
	// runs that cost no more): what a server holds against a team's budget.
	CostAtQuantileUSD float64 `json:"cost_at_quantile_usd,omitempty"`
	// Static is the cheapest static cluster for the same question, for comparison.
	Static *Baseline `json:"static,omitempty"`
	// SavingPct is how much cheaper the plan is predicted to be than Static.
	SavingPct *float64 `json:"saving_pct,omitempty"`
	// Evaluated counts the plans the planner simulated.
	Evaluated int `json:"evaluated,omitempty"`
	// Unproven says the optimal planner's search stopped before it covered its space (a job too
	// large to search whole): the plan is the best it found, not proven the cheapest.
	Unproven bool `json:"unproven,omitempty"`
	// BudgetUSD is the spec's budget.max_cost_usd (0: none).
	BudgetUSD float64 `json:"budget_usd,omitempty"`
	// Alternatives are, when the spec offers several instance types or markets, the best plans
	// the same planner finds on fewer of them (on-demand only; the best single type), each with
	// what the plan saves against it.
	Alternatives []Alternative `json:"alternatives,omitempty"`
	// Search is how the plan batches an adaptive sampler's draws (nil for the others).
	Search *SearchPlan `json:"search,omitempty"`
	// ASHA is an ASHA job's plan (its elastic GPU schedule, what it is compared with): what the
	// job runs; Brackets are empty then.
	ASHA *ASHAResult `json:"asha,omitempty"`
}

// Alternative is the best plan on a subset of the offers.
type Alternative struct {
	// Name says which subset: "on-demand only", or "p3.8xlarge only" for the best single type.
	Name      string          `json:"name"`
	Feasible  bool            `json:"feasible"`
	Brackets  []BracketReport `json:"brackets"`
	Predicted Prediction      `json:"predicted"`
	// SavingPct is how much cheaper the plan is predicted to be than this one.
	SavingPct *float64 `json:"saving_pct,omitempty"`
}

// ClusterInfo says what the plan's nodes are.
type ClusterInfo struct {
	InstanceType string  `json:"instance_type,omitempty"`
	GPUsPerNode  int     `json:"gpus_per_node"`
	PricePerHour float64 `json:"price_per_hour"`
	Market       string  `json:"market"`
	Billing      string  `json:"billing"`
	MaxNodes     int     `json:"max_nodes"`
	// InstanceTypes and Markets are the candidates a stage may get, when the spec offers
	// several (cluster.instance_types, cluster.markets).
	InstanceTypes []string `json:"instance_types,omitempty"`
	Markets       []string `json:"markets,omitempty"`
}

// BracketReport is one bracket's stages with their allocation and prediction.
type BracketReport struct {
	Name   string            `json:"name"`
	Stages []sim.StageResult `json:"stages"`
}

// Prediction is the predicted JCT (seconds) and cost (dollars).
type Prediction struct {
	JCT              sim.Summary `json:"jct_s"`
	Cost             sim.Summary `json:"cost_usd"`
	DeadlineMissProb float64     `json:"deadline_miss_prob"`
}

// Baseline is a comparison plan.
type Baseline struct {
	Feasible  bool            `json:"feasible"`
	Brackets  []BracketReport `json:"brackets"`
	Predicted Prediction      `json:"predicted"`
}

// NewReport describes a simulated allocation.
func NewReport(exp *spec.Experiment, planner string, deadline float64, feasible bool, res sim.Result) *Report {
	var atQuantile float64
	if len(res.Outcome.Cost) > 0 {
		atQuantile = sim.Quantile(res.Outcome.Cost, exp.Planner.DeadlineQuantile)
	}
	return &Report{
		CostAtQuantileUSD: atQuantile,
		Experiment:        exp.Name, Planner: planner, DeadlineS: deadline, DeadlineQuantile: exp.Planner.DeadlineQuantile,
		Samples: res.Samples, Seed: exp.Seed, Feasible: feasible,
		Cluster:   clusterInfo(exp),
		Brackets:  bracketReports(res),
		Predicted: prediction(res, deadline),
		BudgetUSD: exp.Budget.MaxCostUSD,
		Search:    searchPlan(exp, res),
	}
}

func clusterInfo(exp *spec.Experiment) ClusterInfo {
	c := exp.Cluster
	var types []string
	for _, it := range c.InstanceTypes {
		types = append(types, it.InstanceType)
	}
	var markets []string
	if len(c.Markets) > 1 {
		markets = c.Markets
	}
	return ClusterInfo{InstanceType: c.InstanceType, GPUsPerNode: c.GPUsPerNode, PricePerHour: c.HourlyPrice(),
		Market: c.Market, Billing: c.Billing.Model, MaxNodes: c.MaxNodes, InstanceTypes: types, Markets: markets}
}

// SetStatic adds the static baseline and the saving against it.
func (r *Report) SetStatic(feasible bool, res sim.Result) {
	r.Static = &Baseline{Feasible: feasible, Brackets: bracketReports(res), Predicted: prediction(res, r.DeadlineS)}
	if feasible && r.Feasible && res.Cost.Mean > 0 {
		s := 100 * (1 - r.Predicted.Cost.Mean/res.Cost.Mean)
		r.SavingPct = &s
	}
}

// AddAlternative adds the best plan on a subset of the offers and the saving against it.
func (r *Report) AddAlternative(name string, feasible bool, res sim.Result) {
	alt := Alternative{Name: name, Feasible: feasible, Brackets: bracketReports(res), Predicted: prediction(res, r.DeadlineS)}
	if feasible && r.Feasible && res.Cost.Mean > 0 {
		s := 100 * (1 - r.Predicted.Cost.Mean/res.Cost.Mean)
		alt.SavingPct = &s
	}
	r.Alternatives = append(r.Alternatives, alt)
}

// Subset is a named subset of a problem's offers that a plan is compared with.
type Subset struct {
	Name   string
	Offers []int
}

// Subsets are what a plan over several offers is compared with: on-demand only (when spot is
// offered too) and each instance type alone (when there are several).
func Subsets(m *sim.Model) []Subset {
	var out []Subset
	if onDemand := OffersWhere(m, func(o *sim.Offer) bool { return o.Market == spec.MarketOnDemand }); len(onDemand) > 0 && len(onDemand) < len(m.Offers) {
		out = append(out, Subset{Name: "on-demand only", Offers: onDemand})
	}
	var types []string
	for _, o := range m.Offers {
		if !slices.Contains(types, o.Type) {
			types = append(types, o.Type)
		}
	}
	if len(types) > 1 {
		for _, typ := range types {
			out = append(out, Subset{Name: typ + " only", Offers: OffersWhere(m, func(o *sim.Offer) bool { return o.Type == typ })})
		}
	}
	return out
}

// Alternatives runs planner name on each subset of Subsets and keeps on-demand only and the best
// single type: the plans `plan` shows beside its own.
func Alternatives(p *Problem, name string) ([]Subset, []Result, error) {
	var subsets []Subset
	var results []Result
	bestType := -1
	for _, sub := range Subsets(p.model()) {
		res, err := Run(p.Restrict(sub.Offers), name)
		if err != nil {
			return nil, nil, err
		}
		if res.Best.Alloc == nil {
			continue
		}
		if sub.Name == "on-demand only" {
			subsets, results = append(subsets, sub), append(results, res)
			continue
		}
		switch {
		case bestType < 0:
			bestType = len(results)
			subsets, results = append(subsets, sub), append(results, res)
		case better(res.Best, results[bestType].Best):
			subsets[bestType], results[bestType] = sub, res
		}
	}
	return subsets, results, nil
}

func bracketReports(res sim.Result) []BracketReport {
	out := make([]BracketReport, len(res.Brackets))
	for i, b := range res.Brackets {
		out[i] = BracketReport{Name: b.Name, Stages: b.Stages}
	}
	return out
}

func prediction(res sim.Result, deadline float64) Prediction {
	p := Prediction{JCT: res.JCT, Cost: res.Cost}
	if deadline > 0 {
		p.DeadlineMissProb = sim.MissProb(res.Outcome.JCT, deadline)
	}
	return p
}

// Alloc returns the report's allocation after checking that it was made for these brackets.
func (r *Report) Alloc(brackets []spec.Bracket) (sim.Alloc, error) {
	if len(r.Brackets) != len(brackets) {
		return nil, fmt.Errorf("plan has %d brackets, the spec %d", len(r.Brackets), len(brackets))
	}
	a := make(sim.Alloc, len(brackets))
	for b, br := range brackets {
		if len(r.Brackets[b].Stages) != len(br.Stages) {
			return nil, fmt.Errorf("plan bracket %d has %d stages, the spec %d", b, len(r.Brackets[b].Stages), len(br.Stages))
		}
		for k, st := range br.Stages {
			ps := r.Brackets[b].Stages[k]
			if ps.Trials != st.Trials || ps.Iters != st.Iters {
				return nil, fmt.Errorf("plan bracket %d stage %d is %d trials x %d iterations, the spec %d x %d (was the plan made for another spec?)",
					b, k, ps.Trials, ps.Iters, st.Trials, st.Iters)
			}
			a[b] = append(a[b], sim.StageAlloc{GPUs: ps.GPUs, Nodes: ps.Nodes, Type: ps.Type, Market: ps.Market, OnDemand: ps.OnDemandNodes})
		}
	}
	return a, nil
}

// EncodeReport is a plan file's bytes (`plan --out`), as ReadReport reads them; the caller
// writes them where it will (planner does no I/O).
func EncodeReport(rep *Report) ([]byte, error) {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return append(data, '\n'), nil
}

// ReadReport decodes a plan file.
func ReadReport(r io.Reader) (*Report, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var rep Report
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	switch {
	case rep.ASHA != nil:
		if len(rep.ASHA.Elastic.Plan.GPUs) == 0 {
			return nil, fmt.Errorf("read plan: an asha plan with no GPU schedule")
		}
	case len(rep.Brackets) == 0:
		return nil, fmt.Errorf("read plan: no brackets")
	}
	return &rep, nil
}
