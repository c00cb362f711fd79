package rundir

import (
	"errors"
	"fmt"

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
	obj := v.State.Exp.Objective
	b := &BestTrial{Experiment: v.State.Exp.Name, RunID: v.Res.RunID, Trial: v.Res.Best.Trial, Metric: obj.Metric, Mode: obj.Mode,
		Value: v.Res.Best.Metric, Params: v.Res.Best.Params}
	events, err := v.AllEvents()
	if err != nil {
		return nil, err
	}
	for _, cv := range LearningCurves(v.State.Exp, events) {
		if cv.Trial == b.Trial {
			for i := range cv.X {
				b.Curve = append(b.Curve, CurvePoint{Iter: int(cv.X[i]), Value: cv.Y[i]})
			}
		}
	}
	if n := len(b.Curve); n > 0 {
		b.Iter = b.Curve[n-1].Iter
	}
	return b, nil
}
