package charts

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The pictures of rubberband's commands, from its own types: plan, simulate, whatif, report.

// PlanSchedule draws one sampled run of an allocation as the cluster's schedule.
func PlanSchedule(file string, s *sim.Simulator, a sim.Alloc, title string) error {
	sc, err := s.Schedule(a)
	if err != nil {
		return err
	}
	return Schedule(file, title, sc, byTrial)
}

// byTrial colours a planned schedule's spans by trial (brackets' trials apart).
func byTrial(sp sim.Span) int { return sp.Bracket*100000 + sp.Trial }

// Schedule draws a schedule, planned or realized, its TRAIN spans coloured by label.
func Schedule(file, title string, sc sim.Schedule, label func(sim.Span) int, marks ...Mark) error {
	bars := make([]Bar, len(sc.Spans))
	for i, sp := range sc.Spans {
		gpn := float64(sc.GPUsPerNode)
		if sp.NodeGPUs > 0 { // a node of another instance type
			gpn = float64(sp.NodeGPUs)
		}
		kind := "train"
		if sp.Provision {
			kind = "provision"
		}
		bars[i] = Bar{Row: sp.Row, Start: sp.Start, End: sp.End, Kind: kind, Label: label(sp),
			Lo: float64(sp.GPU) / gpn, Hi: float64(sp.GPU+sp.GPUs) / gpn}
	}
	_, err := Gantt(file, title, max(sc.Rows, 1), bars, sc.StageEnds, marks...)
	return err
}

// Predictions draws the predicted JCT's histogram to file and the cost's to file-cost.EXT, the
// deadline marked.
func Predictions(file string, res sim.Result, deadline float64, name string) error {
	jct := make([]float64, len(res.Outcome.JCT))
	for i, x := range res.Outcome.JCT {
		jct[i] = x / 60
	}
	label := ""
	if deadline > 0 {
		label = "deadline " + format.Clock(deadline)
	}
	if err := Histogram(file, name+": predicted completion time ("+fmt.Sprint(res.Samples)+" samples)", "JCT (minutes)", jct, deadline/60, label); err != nil {
		return err
	}
	ext := filepath.Ext(file)
	return Histogram(strings.TrimSuffix(file, ext)+"-cost"+ext, name+": predicted cost ("+fmt.Sprint(res.Samples)+" samples)",
		"cost (dollars)", res.Outcome.Cost, 0, "")
}

// WhatIf draws cost against the first sweep, one line per planner (other sweeps at their first
// value); infeasible points are left out of the lines (the table and CSV show them).
func WhatIf(file string, out *planner.WhatIf, sweeps []spec.Sweep) error {
	first := sweeps[0]
	xs, unit, numeric := sweepAxis(first.Values)
	var ticks []plot.Tick
	if !numeric {
		for i, v := range first.Values {
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: v})
		}
	}
	var series []Series
	for _, name := range out.Planners {
		s := Series{Name: name}
		for _, p := range out.Points {
			if !atFirstValues(p.Values, sweeps) {
				continue
			}
			o, ok := p.Results[name]
			if !ok || !o.Feasible {
				continue
			}
			i := indexOfValue(first.Values, p.Values[0])
			s.X = append(s.X, xs[i])
			s.P50 = append(s.P50, o.Predicted.Cost.P50)
			s.Lo = append(s.Lo, o.Predicted.Cost.P5)
			s.Hi = append(s.Hi, o.Predicted.Cost.P95)
		}
		series = append(series, s)
	}
	title := out.Experiment + ": predicted cost against " + first.Name
	if len(sweeps) > 1 {
		title += " (other sweeps at their first value)"
	}
	label := first.Name + unit
	if l, ok := axisLabel(first.Name); ok {
		label = l
	}
	return Band(file, title, label, "cost (dollars)", series, ticks)
}

// sweepAxis turns sweep values into x positions: minutes for durations, numbers as they are,
// else their index (labelled by ticks).
func sweepAxis(values []string) ([]float64, string, bool) {
	xs := make([]float64, len(values))
	durations, numbers := true, true
	for i, v := range values {
		if d, err := time.ParseDuration(v); err == nil {
			xs[i] = d.Minutes()
			numbers = false
			continue
		}
		durations = false
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			xs[i] = f
			continue
		}
		numbers = false
	}
	switch {
	case durations:
		return xs, " (minutes)", true
	case numbers:
		return xs, "", true
	}
	for i := range xs {
		xs[i] = float64(i)
	}
	return xs, "", false
}

func atFirstValues(p spec.Point, sweeps []spec.Sweep) bool {
	for i := 1; i < len(sweeps); i++ {
		if p[i] != sweeps[i].Values[0] {
			return false
		}
	}
	return true
}

func indexOfValue(values []string, v string) int {
	for i, x := range values {
		if x == v {
			return i
		}
	}
	return 0
}

// axisLabel names the usual sweeps with their units.
func axisLabel(name string) (string, bool) {
	switch name {
	case "deadline":
		return "deadline (minutes)", true
	case spec.IterLatencyStd:
		return "standard deviation of one iteration on one GPU (seconds)", true
	case spec.IterLatencyScale:
		return "iteration latency (times the profile's)", true
	case "cluster.data.price_per_gb":
		return "data price (dollars per GB)", true
	case "algorithm.sha.trials":
		return "trials", true
	case "cluster.init_latency.value":
		return "instance initialisation (minutes)", true
	}
	return "", false
}

// RunPictures is what Run draws of a run, as its caller reads it from the run's state
// (rundir's Replayed.Pictures): charts knows no run folder or journal.
type RunPictures struct {
	Name, Metric string
	Curves       []Curve // every trial's learning curve, promotions marked
	// Planned is one sampled run of the plan; Realized the run's schedule up to its last event,
	// with its interruptions and re-plans (Marks).
	Planned, Realized sim.Schedule
	Marks             []Mark
	// Stages name the stages ("BRACKET/STAGE", from 1) whose predicted and realized costs
	// PredictedCost and RealizedCost hold.
	Stages                      []string
	PredictedCost, RealizedCost []float64
}

// Run draws a run's pictures into dir: its learning curves (curves.png), its planned and
// realized schedules (gantt-planned.png, gantt-realized.png, interruptions and re-plans
// marked) and its cost per stage, predicted beside realized (cost.png).
func Run(dir string, p RunPictures) error {
	if err := Curves(filepath.Join(dir, "curves.png"), fmt.Sprintf("%s: learning curves of %d trials", p.Name, len(p.Curves)),
		p.Metric, p.Curves); err != nil {
		return err
	}
	if err := Schedule(filepath.Join(dir, "gantt-planned.png"), p.Name+": planned schedule (one sampled run)", p.Planned, byTrial); err != nil {
		return err
	}
	if err := Schedule(filepath.Join(dir, "gantt-realized.png"), p.Name+": realized schedule", p.Realized,
		func(sp sim.Span) int { return sp.Trial }, p.Marks...); err != nil {
		return err
	}
	return Paired(filepath.Join(dir, "cost.png"), p.Name+": cost per stage", "cost (dollars)", p.Stages, p.PredictedCost, p.RealizedCost, "predicted", "realized")
}
