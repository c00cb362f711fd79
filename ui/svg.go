package ui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/palette"
	"github.com/rubberband-hpo/rubberband/sim"
)

// chart is an SVG picture as the "svg" template draws it: plain shapes whose coordinates are
// computed here, and whose every text (trial IDs, titles) the template escapes.
type chart struct {
	ID     string
	W, H   float64
	Title  string
	Rects  []rect
	Lines  []line
	Paths  []path
	Dots   []dot
	Texts  []text
	Legend []legendItem
}

type rect struct {
	X, Y, W, H  float64
	Fill, Class string
	Title       string
}

type line struct {
	X1, Y1, X2, Y2 float64
	Class, Title   string
}

type path struct {
	ID                  string // an anchor a link can point at (#ID), or none
	D                   string
	Stroke, Fill, Class string
	Title               string
}

type dot struct {
	X, Y, R     float64
	Fill, Class string
	Title       string
}

type text struct {
	X, Y   float64
	Text   string
	Anchor string
	Class  string
}

type legendItem struct {
	Color, Label string
}

// The plot area of every chart.
const (
	chartW      = 620.0
	marginL     = 58.0
	marginR     = 12.0
	marginT     = 12.0
	marginB     = 30.0
	plotW       = chartW - marginL - marginR
	maxGanttH   = 320.0
	lineChartH  = 240.0
	maxRowLabel = 24
)

// trialColour spreads trials over the hue circle (golden angle), so neighbours differ.
func trialColour(k int) string {
	return fmt.Sprintf("hsl(%.0f,62%%,52%%)", math.Mod(float64(k)*137.508, 360))
}

// niceStep is a round step that cuts span into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// axis maps data to the plot area.
type axis struct {
	x0, x1, y0, y1 float64 // data range
	top, h         float64 // plot area's top and height in pixels
}

func (a axis) x(v float64) float64 {
	if a.x1 <= a.x0 {
		return marginL
	}
	return marginL + (v-a.x0)/(a.x1-a.x0)*plotW
}

func (a axis) y(v float64) float64 {
	if a.y1 <= a.y0 {
		return a.top + a.h
	}
	return a.top + a.h - (v-a.y0)/(a.y1-a.y0)*a.h
}

// ticks adds the x axis's labels (format formats a value) and, when yFormat is set, the y axis's.
func (a axis) ticks(c *chart, format, yFormat func(float64) string) {
	bottom := a.top + a.h
	c.Lines = append(c.Lines, line{X1: marginL, Y1: bottom, X2: marginL + plotW, Y2: bottom, Class: "axis"})
	step := niceStep(a.x1-a.x0, 6)
	for v := math.Ceil(a.x0/step) * step; v <= a.x1+1e-9; v += step {
		c.Lines = append(c.Lines, line{X1: a.x(v), Y1: bottom, X2: a.x(v), Y2: bottom + 4, Class: "axis"})
		c.Texts = append(c.Texts, text{X: a.x(v), Y: bottom + 16, Text: format(v), Anchor: "middle", Class: "tick"})
	}
	if yFormat == nil {
		return
	}
	c.Lines = append(c.Lines, line{X1: marginL, Y1: a.top, X2: marginL, Y2: bottom, Class: "axis"})
	step = niceStep(a.y1-a.y0, 4)
	for v := math.Ceil(a.y0/step) * step; v <= a.y1+1e-9; v += step {
		c.Lines = append(c.Lines, line{X1: marginL, Y1: a.y(v), X2: marginL + plotW, Y2: a.y(v), Class: "grid"})
		c.Texts = append(c.Texts, text{X: marginL - 4, Y: a.y(v) + 4, Text: yFormat(v), Anchor: "end", Class: "tick"})
	}
}

// mark is a moment drawn across a chart: an interruption, a re-plan, the deadline.
type mark struct {
	At    float64
	Class string
	Title string
}

// gantt draws a cluster schedule: a row per node, TRAIN bars per trial (within the GPUs they
// held), SCALE/INIT shaded, a dashed line at each stage's end, and the marks. xmax is shared by
// the planned and the realized chart so that they line up.
func gantt(id, title string, sc sim.Schedule, xmax float64, name func(sim.Span) (colour int, title string), running func(sim.Span) bool, marks []mark) chart {
	if n := len(sc.Spans); n > maxGanttSpans {
		sc.Spans = longestSpans(sc.Spans, maxGanttSpans)
		title += fmt.Sprintf(" — the %d longest of %d spans", maxGanttSpans, n)
	}
	rows := max(sc.Rows, 1)
	rowH := math.Min(18, maxGanttH/float64(rows))
	a := axis{x0: 0, x1: xmax, top: marginT, h: rowH * float64(rows)}
	c := chart{ID: id, W: chartW, H: marginT + a.h + marginB, Title: title}
	for r := range rows {
		c.Rects = append(c.Rects, rect{X: marginL, Y: a.top + float64(r)*rowH, W: plotW, H: rowH, Class: "row" + fmt.Sprint(r%2)})
		if rows <= maxRowLabel {
			c.Texts = append(c.Texts, text{X: marginL - 4, Y: a.top + (float64(r)+0.7)*rowH, Text: fmt.Sprintf("node %d", r), Anchor: "end", Class: "tick"})
		}
	}
	gpn := float64(max(sc.GPUsPerNode, 1))
	stage, stageEnd := "stage", "stage end "
	if sc.Rungs {
		stage, stageEnd = "rung", "phase from "
	}
	for _, sp := range sc.Spans {
		lo, hi := float64(sp.GPU)/gpn, float64(sp.GPU+sp.GPUs)/gpn
		if hi <= lo {
			lo, hi = 0, 1
		}
		b := rect{X: a.x(sp.Start), Y: a.top + (float64(sp.Row)+lo)*rowH, W: math.Max(a.x(sp.End)-a.x(sp.Start), 0.5), H: math.Max((hi-lo)*rowH-0.6, 0.6)}
		if sp.Provision {
			b.Class, b.Title = "prov", fmt.Sprintf("SCALE/INIT (bracket %d, %s %d): %s to %s", sp.Bracket, stage, sp.Stage+1, clock(sp.Start), clock(sp.End))
		} else {
			k, t := name(sp)
			b.Fill, b.Class = trialColour(k), "train"
			b.Title = fmt.Sprintf("%s (%s %d): %s to %s", t, stage, sp.Stage+1, clock(sp.Start), clock(sp.End))
			if running != nil && running(sp) {
				b.Class, b.Title = "train running", b.Title+" (running)"
			}
		}
		c.Rects = append(c.Rects, b)
	}
	bottom := a.top + a.h
	for _, e := range sc.StageEnds {
		c.Lines = append(c.Lines, line{X1: a.x(e), Y1: a.top, X2: a.x(e), Y2: bottom, Class: "stage", Title: stageEnd + clock(e)})
	}
	for _, m := range marks {
		c.Lines = append(c.Lines, line{X1: a.x(m.At), Y1: a.top, X2: a.x(m.At), Y2: bottom, Class: m.Class, Title: m.Title})
	}
	a.ticks(&c, clock, nil)
	return c
}

// series is one line of a line chart, with an optional band (Lo..Hi) and dots at Marks.
type series struct {
	Name   string
	Colour string
	X, Y   []float64
	Lo, Hi []float64
	Marks  []int
	Title  string
	Thin   bool
	// Anchor, when set, is the drawn line's id: a link to #Anchor points at it.
	Anchor string
	// Dots draws the points alone (a scatter), each titled by Labels[i] when given.
	Dots   bool
	Labels []string
}

// lineChart draws series over shared axes with vertical and horizontal marks.
func lineChart(id, title string, ss []series, vmarks, hmarks []mark, xFormat, yFormat func(float64) string) chart {
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	see := func(x, y float64) {
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(y, 0) {
			return
		}
		x0, x1, y0, y1 = math.Min(x0, x), math.Max(x1, x), math.Min(y0, y), math.Max(y1, y)
	}
	for _, s := range ss {
		for i := range s.X {
			see(s.X[i], s.Y[i])
			if s.Lo != nil {
				see(s.X[i], s.Lo[i])
				see(s.X[i], s.Hi[i])
			}
		}
	}
	for _, m := range vmarks {
		see(m.At, y0)
	}
	for _, m := range hmarks {
		see(x0, m.At)
	}
	if math.IsInf(x0, 0) {
		x0, x1, y0, y1 = 0, 1, 0, 1
	}
	if y1 == y0 {
		y1 = y0 + 1
	}
	pad := 0.06 * (y1 - y0)
	a := axis{x0: x0, x1: x1, y0: math.Max(0, y0-pad), y1: y1 + pad, top: marginT, h: lineChartH - marginT - marginB}
	if y0 < 0 {
		a.y0 = y0 - pad
	}
	c := chart{ID: id, W: chartW, H: lineChartH, Title: title}
	a.ticks(&c, xFormat, yFormat)
	for i, s := range ss {
		col := s.Colour
		if col == "" {
			col = palette.Series[i%len(palette.Series)]
		}
		if s.Lo != nil && len(s.X) > 0 {
			var d strings.Builder
			for j := range s.X {
				fmt.Fprintf(&d, "%s%.1f %.1f ", map[bool]string{true: "M", false: "L"}[j == 0], a.x(s.X[j]), a.y(s.Hi[j]))
			}
			for j := len(s.X) - 1; j >= 0; j-- {
				fmt.Fprintf(&d, "L%.1f %.1f ", a.x(s.X[j]), a.y(s.Lo[j]))
			}
			d.WriteString("Z")
			c.Paths = append(c.Paths, path{D: d.String(), Fill: col, Class: "band", Title: s.Name + " (p5-p95)"})
		}
		if s.Dots {
			for j := range s.X {
				if math.IsNaN(s.Y[j]) {
					continue
				}
				title := s.Name
				if j < len(s.Labels) {
					title = s.Labels[j]
				}
				c.Dots = append(c.Dots, dot{X: a.x(s.X[j]), Y: a.y(s.Y[j]), R: 2.5, Fill: col, Class: "point", Title: title})
			}
			continue
		}
		var d strings.Builder
		for j := range s.X {
			if math.IsNaN(s.Y[j]) {
				continue
			}
			cmd := "L"
			if d.Len() == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, a.x(s.X[j]), a.y(s.Y[j]))
		}
		class := "series"
		if s.Thin {
			class = "series thin"
		}
		t := s.Title
		if t == "" {
			t = s.Name
		}
		if d.Len() > 0 {
			c.Paths = append(c.Paths, path{ID: s.Anchor, D: d.String(), Stroke: col, Fill: "none", Class: class, Title: t})
		}
		for _, j := range s.Marks {
			c.Dots = append(c.Dots, dot{X: a.x(s.X[j]), Y: a.y(s.Y[j]), R: 3, Fill: col, Class: "mark", Title: t + ": promoted"})
		}
		if s.Name != "" && !s.Thin {
			c.Legend = append(c.Legend, legendItem{Color: col, Label: s.Name})
		}
	}
	bottom := a.top + a.h
	for _, m := range vmarks {
		c.Lines = append(c.Lines, line{X1: a.x(m.At), Y1: a.top, X2: a.x(m.At), Y2: bottom, Class: m.Class, Title: m.Title})
	}
	for _, m := range hmarks {
		c.Lines = append(c.Lines, line{X1: marginL, Y1: a.y(m.At), X2: marginL + plotW, Y2: a.y(m.At), Class: m.Class, Title: m.Title})
	}
	return c
}

// clock and money are the formats of the CLI (package format), for templates and charts.
func clock(s float64) string { return format.Clock(s) }
func money(x float64) string { return format.Money(x) }

func dollars(x float64) string { return fmt.Sprintf("$%.3g", x) }

// maxGanttSpans is the most spans a schedule chart draws: a 100,000-trial run's launches are
// mostly narrower than a pixel, and drawn whole they made a page of tens of megabytes.
const maxGanttSpans = 1500

// longestSpans are the n longest of spans, in their order.
func longestSpans(spans []sim.Span, n int) []sim.Span {
	return topN(spans, n, func(sp sim.Span) float64 { return sp.End - sp.Start })
}

// topN are the n of xs that score highest (all of them when fewer; the first among equals), in
// their order. It keeps the n best in a heap as it walks xs once: choosing 50 curves of 100,000
// trials sorted all of them for each rendering.
func topN[T any](xs []T, n int, score func(T) float64) []T {
	if len(xs) <= n {
		return xs
	}
	if n <= 0 {
		return nil
	}
	type scored struct {
		s float64
		i int
	}
	// worse orders the heap: its root is the worst kept, a lower score or a later one of equals.
	worse := func(a, b scored) bool {
		if c := cmp.Compare(a.s, b.s); c != 0 {
			return c < 0
		}
		return a.i > b.i
	}
	h := make([]scored, 0, n)
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(h) && worse(h[l], h[m]) {
				m = l
			}
			if r := l + 1; r < len(h) && worse(h[r], h[m]) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i, x := range xs {
		c := scored{score(x), i}
		switch {
		case len(h) < n:
			h = append(h, c)
			for j := len(h) - 1; j > 0 && worse(h[j], h[(j-1)/2]); j = (j - 1) / 2 {
				h[j], h[(j-1)/2] = h[(j-1)/2], h[j]
			}
		case worse(h[0], c):
			h[0] = c
			down(0)
		}
	}
	idx := make([]int, len(h))
	for k, c := range h {
		idx[k] = c.i
	}
	slices.Sort(idx)
	out := make([]T, len(idx))
	for k, j := range idx {
		out[k] = xs[j]
	}
	return out
}
