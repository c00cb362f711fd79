package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/internal/charts"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// drawGantt draws one sampled run of an allocation as the cluster's schedule.
func drawGantt(file string, s *sim.Simulator, a sim.Alloc, title string) error {
	sc, err := s.Schedule(a)
	if err != nil {
		return err
	}
	return drawSchedule(file, title, sc, func(sp sim.Span) int { return sp.Bracket*100000 + sp.Trial })
}

// drawSchedule draws a schedule, planned or realized, its TRAIN spans coloured by label.
func drawSchedule(file, title string, sc sim.Schedule, label func(sim.Span) int, marks ...charts.Mark) error {
	bars := make([]charts.Bar, len(sc.Spans))
	for i, sp := range sc.Spans {
		gpn := float64(sc.GPUsPerNode)
		if sp.NodeGPUs > 0 { // a node of another instance type
			gpn = float64(sp.NodeGPUs)
		}
		kind := "train"
		if sp.Provision {
			kind = "provision"
		}
		bars[i] = charts.Bar{Row: sp.Row, Start: sp.Start, End: sp.End, Kind: kind, Label: label(sp),
			Lo: float64(sp.GPU) / gpn, Hi: float64(sp.GPU+sp.GPUs) / gpn}
	}
	_, err := charts.Gantt(file, title, max(sc.Rows, 1), bars, sc.StageEnds, marks...)
	return err
}

// runMarks are a run's interruptions and re-plans, for its realized schedule.
func runMarks(res *executor.Result) []charts.Mark {
	var marks []charts.Mark
	for _, in := range res.Interruptions {
		marks = append(marks, charts.Mark{At: in.At, Kind: charts.MarkInterruption})
	}
	for _, r := range res.Revisions {
		marks = append(marks, charts.Mark{At: r.At, Kind: charts.MarkReplan})
	}
	return marks
}

// drawHistograms draws the predicted JCT to file and the cost to file-cost.EXT.
func drawHistograms(file string, res sim.Result, deadline float64, name string) error {
	jct := make([]float64, len(res.Outcome.JCT))
	for i, x := range res.Outcome.JCT {
		jct[i] = x / 60
	}
	label := ""
	if deadline > 0 {
		label = "deadline " + clock(deadline)
	}
	if err := charts.Histogram(file, name+": predicted completion time ("+fmt.Sprint(res.Samples)+" samples)", "JCT (minutes)", jct, deadline/60, label); err != nil {
		return err
	}
	ext := filepath.Ext(file)
	return charts.Histogram(strings.TrimSuffix(file, ext)+"-cost"+ext, name+": predicted cost ("+fmt.Sprint(res.Samples)+" samples)",
		"cost (dollars)", res.Outcome.Cost, 0, "")
}

// plotWhatIf draws cost against the first sweep, one line per planner (other sweeps at their
// first value); infeasible points are left out of the lines (the table and CSV show them).
func plotWhatIf(file string, out WhatIf, sweeps []spec.Sweep) error {
	first := sweeps[0]
	xs, unit, numeric := sweepAxis(first.Values)
	var ticks []plot.Tick
	if !numeric {
		for i, v := range first.Values {
			ticks = append(ticks, plot.Tick{Value: float64(i), Label: v})
		}
	}
	var series []charts.Series
	for _, name := range out.Planners {
		s := charts.Series{Name: name}
		for _, p := range out.Points {
			if !atFirstValues(p.values, sweeps) {
				continue
			}
			o, ok := p.Results[name]
			if !ok || !o.Feasible {
				continue
			}
			i := indexOfValue(first.Values, p.values[0])
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
	return charts.Band(file, title, label, "cost (dollars)", series, ticks)
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
