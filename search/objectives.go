package search

import (
	"math"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Losses is a result's place among several objectives: one loss per objective of exp, in its
// order (Loss of each metric: negated when maximised, +Inf when not reported), and how far the
// result lies outside exp's constraints, summed (0: feasible; +Inf when a constrained metric was
// not reported). metrics is what the trainer reported, with spec.CostMetric added by the run.
func Losses(exp *spec.Experiment, metrics map[string]float64) (losses []float64, violation float64) {
	losses = make([]float64, len(exp.Objectives))
	for i, o := range exp.Objectives {
		losses[i] = Loss(metricOrNaN(metrics, o.Metric), o.Mode)
	}
	for _, c := range exp.Constraints {
		violation += c.Violation(metricOrNaN(metrics, c.Metric))
	}
	return losses, violation
}

func metricOrNaN(metrics map[string]float64, name string) float64 {
	if v, ok := metrics[name]; ok {
		return v
	}
	return math.NaN()
}
