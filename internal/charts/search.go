package charts

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/spec"
)

// maxSearchPanels bounds the parameters drawn: the most important ones.
const maxSearchPanels = 8

// Found is what a run's search found, as Search draws it (its caller reads it from the run:
// rundir's SearchSummary.Found).
type Found struct {
	Best        *FoundBest // nil when no trial reported the objective
	Importances []search.Importance
	Points      []FoundPoint // each trial's configuration and objective at the summary's budget
}

// FoundBest is the best trial: its ID, objective, configuration and learning curve (X the
// iterations, Y the objective).
type FoundBest struct {
	Trial  string
	Value  float64
	Params spec.Config
	Curve  Curve
}

// FoundPoint is one trial's configuration and its objective as reported (not a loss).
type FoundPoint struct {
	Params spec.Config
	Value  float64
}

// Search draws what a run's search found on one PNG: the best trial's learning curve, then one
// scatter per parameter (the most important first, at most eight) of the objective against the
// parameter's value at the summary's budget, the best configuration's value marked.
func Search(file string, exp *spec.Experiment, s Found) error {
	var panels []*plot.Plot
	metric := exp.Objective.Metric
	best := plot.New()
	best.Title.Text = "best trial"
	best.X.Label.Text, best.Y.Label.Text = "iteration", metric
	if s.Best != nil {
		best.Title.Text = fmt.Sprintf("best trial %s: %s %.4g", s.Best.Trial, metric, s.Best.Value)
		var xy plotter.XYs
		for i, x := range s.Best.Curve.X {
			xy = append(xy, plotter.XY{X: x, Y: s.Best.Curve.Y[i]})
		}
		if len(xy) > 0 {
			l, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			l.Width = vg.Points(2)
			best.Add(l)
		}
	}
	panels = append(panels, best)
	for i, imp := range s.Importances {
		if i == maxSearchPanels {
			break
		}
		p, err := scatter(exp.SearchSpace[imp.Param], imp, metric, s)
		if err != nil {
			return err
		}
		panels = append(panels, p)
	}
	const cols = 3
	rows := (len(panels) + cols - 1) / cols
	img := vgimg.New(vg.Length(cols)*4*vg.Inch, vg.Length(rows)*3*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols)
		for c := range grid[r] {
			if k := r*cols + c; k < len(panels) {
				grid[r][c] = panels[k]
			}
		}
	}
	canvases := plot.Align(grid, tiles, dc)
	for r := range grid {
		for c := range grid[r] {
			if grid[r][c] != nil {
				grid[r][c].Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("chart %s: %w", file, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("chart %s: %w", file, err)
	}
	return f.Close()
}

// scatter is one parameter's panel: the objective at each value (a choice's values by index,
// log scale for loguniform), the best configuration's value as a vertical line.
func scatter(p spec.Param, imp search.Importance, metric string, s Found) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("%s (explains %.0f%%)", imp.Param, 100*imp.Share)
	pl.X.Label.Text, pl.Y.Label.Text = imp.Param, metric
	if p.Type == "loguniform" {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	value := func(c spec.Config) (float64, bool) {
		v, ok := c[imp.Param]
		if !ok {
			return 0, false
		}
		return search.AxisValue(p, v)
	}
	var xy plotter.XYs
	for _, pt := range s.Points {
		if x, ok := value(pt.Params); ok && !math.IsNaN(pt.Value) {
			xy = append(xy, plotter.XY{X: x, Y: pt.Value})
		}
	}
	if len(xy) > 0 {
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Radius = vg.Points(2)
		sc.GlyphStyle.Color = color.NRGBA{R: 31, G: 119, B: 180, A: 160}
		pl.Add(sc)
	}
	if p.Type == "choice" {
		names := make([]string, len(p.Values))
		for i, v := range p.Values {
			names[i] = fmt.Sprint(v)
		}
		pl.NominalX(names...)
	}
	if s.Best != nil {
		if x, ok := value(s.Best.Params); ok {
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: pl.Y.Min}, {X: x, Y: pl.Y.Max}})
			if err == nil && pl.Y.Max > pl.Y.Min {
				l.Color = color.RGBA{R: 214, G: 39, B: 40, A: 255}
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				pl.Add(l)
			}
		}
	}
	return pl, nil
}
