// Package charts draws rubberband's pictures with gonum/plot, as PNG or SVG by the file's
// extension: cost against a swept parameter, a plan's cluster schedule as a Gantt chart,
// histograms of predicted JCT and cost, and a run's learning curves, realized schedule and cost
// per stage (rubberband.go draws them from rubberband's own types).
package charts
