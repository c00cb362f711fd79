// Package charts draws rubberband's pictures with gonum/plot, as PNG or SVG by the file's
// extension: cost against a swept parameter, a plan's cluster schedule as a Gantt chart,
// histograms of predicted JCT and cost, and a run's learning curves, realized schedule and cost
// per stage (rubberband.go draws them from the model's own types: spec, sim, planner, search).
// It reads no run: what a run's pictures show (RunPictures, Found) its caller builds from the
// run's state (rundir), so charts stays below the readers of a run and the engine.
package charts
