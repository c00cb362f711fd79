package charts

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/palette"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Size of every chart.
const (
	Width  = 10 * vg.Inch
	Height = 6 * vg.Inch
)

func save(p *plot.Plot, file string, w, h vg.Length) error {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".png", ".svg":
	default:
		return fmt.Errorf("chart %s: write .png or .svg", file)
	}
	if err := p.Save(w, h, file); err != nil {
		return fmt.Errorf("chart %s: %w", file, err)
	}
	return nil
}

// Series is one line of a band chart: the middle (P50) with a band from Lo to Hi.
type Series struct {
	Name        string
	X           []float64
	P50, Lo, Hi []float64
	// Legend is what the legend says after the name (default: "(p50, p5-p95 band)").
	Legend string
}

// Band draws one line per series with its shaded band; ticks, when given, label the x values.
func Band(file, title, xLabel, yLabel string, series []Series, ticks []plot.Tick) error {
	return band(file, title, xLabel, yLabel, series, ticks, false)
}

// BandLogY is Band on a logarithmic y axis, for values that span decades (a regret); values
// at or below 0 are drawn at the axis' floor, a tenth of the smallest positive one.
func BandLogY(file, title, xLabel, yLabel string, series []Series) error {
	floor := math.Inf(1)
	for _, s := range series {
		for _, vs := range [][]float64{s.P50, s.Lo, s.Hi} {
			for _, v := range vs {
				if v > 0 {
					floor = math.Min(floor, v/10)
				}
			}
		}
	}
	if math.IsInf(floor, 1) {
		floor = 1
	}
	clamped := make([]Series, len(series))
	for i, s := range series {
		c := s
		c.P50, c.Lo, c.Hi = atLeast(s.P50, floor), atLeast(s.Lo, floor), atLeast(s.Hi, floor)
		clamped[i] = c
	}
	return band(file, title, xLabel, yLabel, clamped, nil, true)
}

func atLeast(vs []float64, floor float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = math.Max(v, floor)
	}
	return out
}

func band(file, title, xLabel, yLabel string, series []Series, ticks []plot.Tick, logY bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if ticks != nil {
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	top, bottom := math.Inf(-1), math.Inf(1)
	for _, s := range series {
		for j := range s.X {
			top, bottom = math.Max(top, s.Hi[j]), math.Min(bottom, s.Lo[j])
		}
	}
	switch {
	case math.IsInf(top, 0):
	case logY: // headroom in decades
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		p.Y.Min = bottom / 1.5
		p.Y.Max = top * math.Pow(top/p.Y.Min, 0.06*float64(len(series)))
	default: // headroom above the data for the legend, so it covers no line
		p.Y.Min = math.Max(0, bottom-0.05*(top-bottom))
		p.Y.Max = top + 0.12*(top-p.Y.Min)*float64(len(series))
	}
	for i, s := range series {
		if len(s.X) == 0 {
			continue
		}
		c := plotutil.Color(i)
		band := make(plotter.XYs, 0, 2*len(s.X))
		for j := range s.X {
			band = append(band, plotter.XY{X: s.X[j], Y: s.Hi[j]})
		}
		for j := len(s.X) - 1; j >= 0; j-- {
			band = append(band, plotter.XY{X: s.X[j], Y: s.Lo[j]})
		}
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return err
		}
		r, g, b, _ := c.RGBA()
		poly.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 50}
		poly.LineStyle.Width = 0
		mid := make(plotter.XYs, len(s.X))
		for j := range s.X {
			mid[j] = plotter.XY{X: s.X[j], Y: s.P50[j]}
		}
		line, points, err := plotter.NewLinePoints(mid)
		if err != nil {
			return err
		}
		line.Color, points.Color = c, c
		line.Width = vg.Points(2)
		points.Shape = plotutil.Shape(i)
		p.Add(poly, line, points)
		legend := s.Legend
		if legend == "" {
			legend = "(p50, p5-p95 band)"
		}
		p.Legend.Add(s.Name+" "+legend, line, points)
	}
	return save(p, file, Width, Height)
}

// Bar is one span of the cluster schedule on one row (a node).
type Bar struct {
	Row        int
	Start, End float64
	// Kind is "train" (coloured by Label, the trial) or "provision" (shaded: SCALE and INIT).
	Kind  string
	Label int
	// Lo and Hi place the bar within its row, as fractions (the GPUs it holds of the node's);
	// both 0 means the whole row.
	Lo, Hi float64
}

// Gantt draws the schedule: one row per node, TRAIN spans coloured by trial, provisioning
// shaded, and a dashed line at each stage boundary. It returns how many TRAIN bars it drew.
func Gantt(file, title string, rows int, bars []Bar, stageEnds []float64, marks ...Mark) (int, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (minutes)"
	p.Y.Label.Text = "node"
	p.Y.Min, p.Y.Max = 0, float64(rows)
	step := max(1, rows/20) // no overlapping labels with hundreds of nodes
	var ticks []plot.Tick
	for r := 0; r < rows; r += step {
		ticks = append(ticks, plot.Tick{Value: float64(r) + 0.5, Label: fmt.Sprint(r)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	trains := 0
	end := 0.0
	for _, b := range bars {
		x0, x1 := b.Start/60, b.End/60
		lo, hi := b.Lo, b.Hi
		if hi <= lo {
			lo, hi = 0, 1
		}
		y0, y1 := float64(b.Row)+0.08+0.84*lo, float64(b.Row)+0.08+0.84*hi
		poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		if err != nil {
			return 0, err
		}
		poly.LineStyle.Width = vg.Points(0.3)
		poly.LineStyle.Color = color.White
		if b.Kind == "train" {
			poly.Color = trialColor(b.Label)
			trains++
		} else {
			poly.Color = color.NRGBA{R: 160, G: 160, B: 160, A: 140}
		}
		p.Add(poly)
		end = math.Max(end, x1)
	}
	for _, t := range stageEnds {
		l, err := plotter.NewLine(plotter.XYs{{X: t / 60, Y: 0}, {X: t / 60, Y: float64(rows)}})
		if err != nil {
			return 0, err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.Black
		p.Add(l)
	}
	kinds := map[string]bool{}
	for _, m := range marks {
		l, err := plotter.NewLine(plotter.XYs{{X: m.At / 60, Y: 0}, {X: m.At / 60, Y: float64(rows)}})
		if err != nil {
			return 0, err
		}
		l.Width = vg.Points(1.5)
		l.Color = markColor(m.Kind)
		p.Add(l)
		if !kinds[m.Kind] {
			kinds[m.Kind] = true
			p.Legend.Add(m.Kind, l)
		}
		end = math.Max(end, m.At/60)
	}
	p.X.Min, p.X.Max = 0, end*1.02
	shade, _ := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: 0}, {X: 0, Y: 0}})
	shade.Color = color.NRGBA{R: 160, G: 160, B: 160, A: 140}
	train, _ := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: 0}, {X: 0, Y: 0}})
	train.Color = trialColor(0)
	p.Legend.Add("TRAIN (colour per trial)", train)
	p.Legend.Add("SCALE + INIT_INSTANCE", shade)
	p.Legend.Top = true
	h := Height
	if rows > 24 {
		h = vg.Length(math.Min(24, 3+float64(rows)*0.12)) * vg.Inch
	}
	return trains, save(p, file, Width, h)
}

// Mark is a moment of a schedule worth seeing, drawn as a vertical line coloured by its kind
// ("spot interruption", "re-plan") with the kind in the legend.
type Mark struct {
	At   float64 // seconds from the start
	Kind string
}

func markColor(kind string) color.Color {
	if kind == MarkReplan {
		return color.NRGBA{R: 30, G: 90, B: 220, A: 255}
	}
	return color.NRGBA{R: 220, G: 30, B: 30, A: 255}
}

// Mark kinds.
const (
	MarkInterruption = "spot interruption"
	MarkReplan       = "re-plan"
)

// trialColor spreads trials over the hue circle (golden angle), so that neighbours differ.
func trialColor(i int) color.Color {
	h := math.Mod(float64(i)*137.508, 360)
	return hsv(h, 0.65, 0.85)
}

func hsv(h, s, v float64) color.Color {
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := v - c
	var r, g, b float64
	switch {
	case h < 60:
		r, g = c, x
	case h < 120:
		r, g = x, c
	case h < 180:
		g, b = c, x
	case h < 240:
		g, b = x, c
	case h < 300:
		r, b = x, c
	default:
		r, b = c, x
	}
	return color.NRGBA{R: uint8((r + m) * 255), G: uint8((g + m) * 255), B: uint8((b + m) * 255), A: 255}
}

// Histogram draws the distribution of values with a vertical line at mark (when above 0).
func Histogram(file, title, xLabel string, values []float64, mark float64, markLabel string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "samples"
	h, err := plotter.NewHist(plotter.Values(values), 30)
	if err != nil {
		return err
	}
	h.FillColor = color.NRGBA{R: 70, G: 130, B: 180, A: 255}
	p.Add(h)
	if mark > 0 {
		top := 0.0
		for _, b := range h.Bins {
			top = math.Max(top, b.Weight)
		}
		l, err := plotter.NewLine(plotter.XYs{{X: mark, Y: 0}, {X: mark, Y: top * 1.05}})
		if err != nil {
			return err
		}
		l.Color = color.NRGBA{R: 200, A: 255}
		l.Width = vg.Points(2)
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(markLabel, l)
		p.Legend.Top = true
	}
	return save(p, file, Width, Height)
}

// Curve is one trial's metric over iterations; Marks are the points where a sync promoted it.
type Curve struct {
	X, Y  []float64
	Marks []int // indices into X and Y
}

// Curves draws every trial's learning curve (thin, one colour per trial) and marks promotions.
func Curves(file, title, yLabel string, curves []Curve) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "iteration"
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	var marks plotter.XYs
	for i, c := range curves {
		if len(c.X) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(c.X))
		for j := range c.X {
			xy[j] = plotter.XY{X: c.X[j], Y: c.Y[j]}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = trialColor(i)
		l.Width = vg.Points(0.8)
		p.Add(l)
		for _, m := range c.Marks {
			marks = append(marks, plotter.XY{X: c.X[m], Y: c.Y[m]})
		}
	}
	if len(marks) > 0 {
		s, err := plotter.NewScatter(marks)
		if err != nil {
			return err
		}
		s.Shape = draw.CircleGlyph{}
		s.Radius = vg.Points(3)
		s.Color = color.Black
		p.Add(s)
		p.Legend.Add("promoted at a sync", s)
		p.Legend.Top = true
		p.Legend.Left = false
	}
	return save(p, file, Width, Height)
}

// Paired draws two bars per category, predicted and realized (cost per stage), in the colours
// the dashboard gives them (package palette).
func Paired(file, title, yLabel string, categories []string, a, b []float64, aName, bName string) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	w := vg.Points(18)
	ba, err := plotter.NewBarChart(plotter.Values(a), w)
	if err != nil {
		return err
	}
	bb, err := plotter.NewBarChart(plotter.Values(b), w)
	if err != nil {
		return err
	}
	ba.Color, bb.Color = palette.RGBA(palette.Predicted), palette.RGBA(palette.Realized)
	ba.Offset, bb.Offset = -w/2, w/2
	p.Add(ba, bb)
	p.Legend.Add(aName, ba)
	p.Legend.Add(bName, bb)
	p.Legend.Top = true
	p.NominalX(categories...)
	return save(p, file, Width, Height)
}
