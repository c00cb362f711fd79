package rundir

import (
	"sort"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Curve is one trial's learning curve: the objective at each reported iteration, and the points
// (indices into X and Y) where a sync promoted the trial.
type Curve struct {
	Trial string
	X, Y  []float64
	Marks []int
}

// LearningCurves are the objective's values every trial reported, in the order the trials first
// reported, with each promotion marked at the last point at or before the end of the stage it
// was promoted from.
func LearningCurves(exp *spec.Experiment, events []journal.Event) []Curve {
	metric := exp.Objective.Metric
	points := map[string][][2]float64{}
	var order []string
	for _, e := range events {
		if e.Ev != journal.EvReport {
			continue
		}
		v, ok := e.Metrics[metric]
		if !ok {
			continue
		}
		if _, seen := points[e.Trial]; !seen {
			order = append(order, e.Trial)
		}
		points[e.Trial] = append(points[e.Trial], [2]float64{float64(e.Iter), v})
	}
	brackets := exp.Algorithm.Brackets()
	var curves []Curve
	index := map[string]int{}
	for _, id := range order {
		pts := points[id]
		sort.SliceStable(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
		cv := Curve{Trial: id}
		for _, p := range pts {
			cv.X, cv.Y = append(cv.X, p[0]), append(cv.Y, p[1])
		}
		index[id] = len(curves)
		curves = append(curves, cv)
	}
	for _, e := range events {
		if e.Ev != journal.EvSync || e.Bracket >= len(brackets) || e.Stage+1 >= len(brackets[e.Bracket].Stages) {
			continue
		}
		end := float64(brackets[e.Bracket].Stages[e.Stage].EndIter())
		for _, id := range e.Keep {
			i, ok := index[id]
			if !ok {
				continue
			}
			for j := len(curves[i].X) - 1; j >= 0; j-- {
				if curves[i].X[j] <= end {
					curves[i].Marks = append(curves[i].Marks, j)
					break
				}
			}
		}
	}
	return curves
}
