package rundir

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/spec"
)

// ErrNoBest is returned for a run that has not finished a bracket: it has no best trial yet.
var ErrNoBest = errors.New("no best trial yet")

// BestTrial is a run's winner with what a user reuses or plots: its configuration, its
// objective and its learning curve.
type BestTrial struct {
	Experiment string      `json:"experiment"`
	RunID      string      `json:"run_id"`
	Trial      string      `json:"trial"`
	Metric     string      `json:"metric"`
	Mode       string      `json:"mode"`
	Value      float64     `json:"value"`
	Iter       int         `json:"iter"`
	Params     spec.Config `json:"params"`
	// Curve is the objective at each iteration rank 0 reported, in order.
	Curve []CurvePoint `json:"curve"`
	// Objectives and Pareto are a multi-objective run's: its objectives, and its Pareto front
	// (runstate.State.Pareto) with each configuration's curve of the first objective. The trial
	// above is the front's first by promotion's order.
	Objectives []spec.Objective `json:"objectives,omitempty"`
	Pareto     []ParetoMember   `json:"pareto,omitempty"`
}

// ParetoMember is one configuration of a run's Pareto front: its result (the spec's objectives
// and constrained metrics, at iteration Iter) and its curve of the first objective.
type ParetoMember struct {
	Trial   string             `json:"trial"`
	Iter    int                `json:"iter"`
	Metrics map[string]float64 `json:"metrics"`
	Params  spec.Config        `json:"params"`
	Curve   []CurvePoint       `json:"curve"`
}

// CurvePoint is one report of the objective.
type CurvePoint struct {
	Iter  int     `json:"iter"`
	Value float64 `json:"value"`
}

// Best is the run's winner (ErrNoBest before a bracket has finished).
func Best(v *View) (*BestTrial, error) {
	if v.Res == nil || v.Res.Best == nil {
		return nil, fmt.Errorf("%s: %w (no bracket has finished)", v.State.Exp.Name, ErrNoBest)
	}
	events, err := v.AllEvents()
	if err != nil {
		return nil, err
	}
	curves := NewCurveFold(v.State.Exp)
	for _, e := range events {
		curves.Apply(e)
	}
	return bestOf(v, curves)
}

// bestOf is Best with the run's learning curves already folded.
func bestOf(v *View, curves *CurveFold) (*BestTrial, error) {
	if v.Res == nil || v.Res.Best == nil {
		return nil, fmt.Errorf("%s: %w (no bracket has finished)", v.State.Exp.Name, ErrNoBest)
	}
	obj := v.State.Exp.Objective
	b := &BestTrial{Experiment: v.State.Exp.Name, RunID: v.Res.RunID, Trial: v.Res.Best.Trial, Metric: obj.Metric, Mode: obj.Mode,
		Value: v.Res.Best.Metric, Params: v.Res.Best.Params}
	if cv, ok := curves.Curve(b.Trial); ok {
		for i := range cv.X {
			b.Curve = append(b.Curve, CurvePoint{Iter: int(cv.X[i]), Value: cv.Y[i]})
		}
	}
	if n := len(b.Curve); n > 0 {
		b.Iter = b.Curve[n-1].Iter
	}
	if exp := v.State.Exp; exp.MultiObjective() {
		b.Objectives = exp.Objectives
		for _, p := range v.Res.Pareto {
			m := ParetoMember{Trial: p.Trial, Iter: p.Iter, Metrics: p.Metrics, Params: p.Params, Curve: []CurvePoint{}}
			if cv, ok := curves.Curve(p.Trial); ok {
				for i := range cv.X {
					m.Curve = append(m.Curve, CurvePoint{Iter: int(cv.X[i]), Value: cv.Y[i]})
				}
			}
			b.Pareto = append(b.Pareto, m)
		}
	}
	return b, nil
}

// Pick is the configuration of best's Pareto front with the best value of metric, one of the
// run's objectives (ties: the front's order), as a BestTrial of that metric: what `best --pick`
// prints ready to reuse. A single-objective run's best is its own pick by its objective.
func Pick(best *BestTrial, metric string) (*BestTrial, error) {
	if len(best.Objectives) == 0 {
		if metric != best.Metric {
			return nil, fmt.Errorf("--pick %s: the run has one objective, %s", metric, best.Metric)
		}
		return best, nil
	}
	i := slices.IndexFunc(best.Objectives, func(o spec.Objective) bool { return o.Metric == metric })
	if i < 0 {
		var names []string
		for _, o := range best.Objectives {
			names = append(names, o.Metric)
		}
		return nil, fmt.Errorf("--pick %s: not one of the run's objectives (%s)", metric, strings.Join(names, ", "))
	}
	mode := best.Objectives[i].Mode
	pick := -1
	for j, m := range best.Pareto {
		v, ok := m.Metrics[metric]
		if !ok || math.IsNaN(v) {
			continue
		}
		if pick < 0 || search.Loss(v, mode) < search.Loss(best.Pareto[pick].Metrics[metric], mode) {
			pick = j
		}
	}
	if pick < 0 {
		return nil, fmt.Errorf("%s: %w (no feasible configuration on the Pareto front reports %s)", best.Experiment, ErrNoBest, metric)
	}
	m := best.Pareto[pick]
	return &BestTrial{Experiment: best.Experiment, RunID: best.RunID, Trial: m.Trial, Metric: metric, Mode: mode, Value: m.Metrics[metric],
		Iter: m.Iter, Params: m.Params, Curve: m.Curve}, nil
}
