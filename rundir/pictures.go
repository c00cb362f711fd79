package rundir

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/charts"
)

// Plot draws the run's pictures into dir (`report --plots`): those of charts.Run, and what its
// search found (search.png).
func (r *Replayed) Plot(dir string) error {
	pics, err := r.Pictures()
	if err != nil {
		return err
	}
	if err := charts.Run(dir, pics); err != nil {
		return err
	}
	return charts.Search(filepath.Join(dir, "search.png"), r.State.Exp, r.Search.Found())
}

// Pictures is what charts.Run draws of the run: its learning curves, its planned schedule (one
// sampled run of the plan) beside the realized one up to its last event, with its
// interruptions and re-plans, and each stage's cost, predicted beside realized.
func (r *Replayed) Pictures() (charts.RunPictures, error) {
	st := r.State
	p := charts.RunPictures{Name: st.Exp.Name, Metric: st.Exp.Objective.Metric}
	for _, cv := range LearningCurves(st.Exp, r.Events) {
		p.Curves = append(p.Curves, charts.Curve{X: cv.X, Y: cv.Y, Marks: cv.Marks})
	}
	var err error
	if p.Planned, err = st.PlannedSchedule(); err != nil {
		return p, err
	}
	snap, err := runstate.Fold(st.RunPlan(), r.Events)
	if err != nil {
		return p, err
	}
	var end time.Time // a run still going is drawn up to its last event
	if len(r.Events) > 0 {
		end = r.Events[len(r.Events)-1].At
	}
	p.Realized = runstate.RealizedSchedule(snap, end, st.Run.TimeScale, st.Exp.Cluster.GPUsPerNode)
	for _, in := range r.Res.Interruptions {
		p.Marks = append(p.Marks, charts.Mark{At: in.At, Kind: charts.MarkInterruption})
	}
	for _, rv := range r.Res.Revisions {
		p.Marks = append(p.Marks, charts.Mark{At: rv.At, Kind: charts.MarkReplan})
	}
	for _, sr := range runstate.Compare(st.Plan, r.Res).Stages {
		p.Stages = append(p.Stages, fmt.Sprintf("%s/%d", sr.Bracket, sr.Stage+1)) // stages from 1, as tables number them
		p.PredictedCost, p.RealizedCost = append(p.PredictedCost, sr.Predicted.Cost), append(p.RealizedCost, sr.Realized.Cost)
	}
	return p, nil
}

// Found is the summary as charts.Search draws it.
func (s *SearchSummary) Found() charts.Found {
	f := charts.Found{Importances: s.Importances}
	if b := s.Best; b != nil {
		f.Best = &charts.FoundBest{Trial: b.Trial, Value: b.Value, Params: b.Params}
		for _, pt := range b.Curve {
			f.Best.Curve.X, f.Best.Curve.Y = append(f.Best.Curve.X, float64(pt.Iter)), append(f.Best.Curve.Y, pt.Value)
		}
	}
	for _, pt := range s.Points {
		f.Points = append(f.Points, charts.FoundPoint{Params: pt.Params, Value: pt.Value})
	}
	return f
}
