package ui

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/spec"
)

// paretoSection is a multi-objective run's Pareto front on its page: the two first objectives
// against each other (every result at the front's iteration, the front's in colour and the
// dominated ones faded), every objective and constrained metric side by side (parallel
// coordinates, better up), and the front's configurations, each linked to its learning curve
// (drawn in the curves chart in the front's colour) and its trial's log.
type paretoSection struct {
	Iter              int
	Metrics           []string
	Front             []frontRow
	Scatter, Parallel chart
}

type frontRow struct {
	Trial string
	// Curve is the anchor of its learning curve in the curves chart (none before it reported).
	Curve  string
	Values []string
	Params string
}

// frontColour is the front's in both charts; dominated results are faded grey.
const frontColour, fadedColour = "#d62728", "#c8c8c8"

// buildPareto draws a multi-objective run's front (nil for one objective, or before a result).
func buildPareto(exp *spec.Experiment, res *runstate.Result) *paretoSection {
	if !exp.MultiObjective() || res == nil {
		return nil
	}
	sec := &paretoSection{Metrics: exp.Metrics()}
	onFront := map[string]bool{}
	for _, p := range res.Pareto {
		sec.Iter = p.Iter
		onFront[p.Trial] = true
		row := frontRow{Trial: p.Trial}
		for _, m := range sec.Metrics {
			row.Values = append(row.Values, g4(p.Metrics[m]))
		}
		var params []string
		for _, name := range slices.Sorted(maps.Keys(p.Params)) {
			params = append(params, fmt.Sprintf("%s=%v", name, p.Params[name]))
		}
		row.Params = strings.Join(params, " ")
		sec.Front = append(sec.Front, row)
	}
	if sec.Iter == 0 {
		return sec
	}
	// The results the front was chosen from: each trial's at the front's iteration.
	var rows []runstate.TrialResult
	for _, t := range res.Trials {
		if t.Iter == sec.Iter && t.Metrics != nil {
			rows = append(rows, t)
		}
	}
	sec.Scatter = paretoScatter(exp, rows, onFront, sec.Iter)
	sec.Parallel = parallelCoordinates(exp, sec.Metrics, rows, onFront)
	return sec
}

func g4(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// paretoScatter is the first objective against the second.
func paretoScatter(exp *spec.Experiment, rows []runstate.TrialResult, onFront map[string]bool, iter int) chart {
	x, y := exp.Objectives[0], exp.Objectives[min(1, len(exp.Objectives)-1)]
	front := series{Name: "Pareto front", Colour: frontColour, Dots: true}
	dominated := series{Name: "dominated or infeasible", Colour: fadedColour, Dots: true}
	for _, t := range rows {
		vx, okx := t.Metrics[x.Metric]
		vy, oky := t.Metrics[y.Metric]
		if !okx || !oky {
			continue
		}
		s := &dominated
		if onFront[t.ID] {
			s = &front
		}
		s.X, s.Y = append(s.X, vx), append(s.Y, vy)
		s.Labels = append(s.Labels, fmt.Sprintf("%s: %s %s, %s %s", t.ID, x.Metric, g4(vx), y.Metric, g4(vy)))
	}
	title := fmt.Sprintf("%s (%s) against %s (%s) at %d iterations: the front in red", y.Metric, y.Mode, x.Metric, x.Mode, iter)
	return lineChart("pareto-scatter", title, []series{dominated, front}, nil, nil, g4, g4)
}

// parallelCoordinates draws each result as a line across one axis per metric, scaled to the
// results' range on each, with the better end up (a min objective's axis is turned over).
func parallelCoordinates(exp *spec.Experiment, metrics []string, rows []runstate.TrialResult, onFront map[string]bool) chart {
	c := chart{ID: "pareto-parallel", W: chartW, H: lineChartH, Title: "every objective and constrained metric, better up: the front in red"}
	top, bottom := marginT+14, lineChartH-marginB
	step := plotW / float64(max(len(metrics)-1, 1))
	lo, hi := make([]float64, len(metrics)), make([]float64, len(metrics))
	for i, m := range metrics {
		lo[i], hi[i] = math.Inf(1), math.Inf(-1)
		for _, t := range rows {
			if v, ok := t.Metrics[m]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo[i], hi[i] = min(lo[i], v), max(hi[i], v)
			}
		}
	}
	minimised := func(m string) bool {
		for _, o := range exp.Objectives {
			if o.Metric == m {
				return o.Mode == "min"
			}
		}
		for _, k := range exp.Constraints {
			if k.Metric == m {
				return k.Max != nil
			}
		}
		return false
	}
	for i, m := range metrics {
		x := marginL + float64(i)*step
		c.Lines = append(c.Lines, line{X1: x, Y1: top, X2: x, Y2: bottom, Class: "axis"})
		c.Texts = append(c.Texts, text{X: x, Y: marginT + 4, Text: m, Anchor: "middle", Class: "label"})
		if hi[i] >= lo[i] {
			up, down := hi[i], lo[i]
			if minimised(m) {
				up, down = lo[i], hi[i]
			}
			c.Texts = append(c.Texts, text{X: x + 3, Y: top + 10, Text: g4(up), Class: "tick"}, text{X: x + 3, Y: bottom - 2, Text: g4(down), Class: "tick"})
		}
	}
	draw := func(front bool) {
		for _, t := range rows {
			if onFront[t.ID] != front {
				continue
			}
			var d strings.Builder
			for i, m := range metrics {
				v, ok := t.Metrics[m]
				if !ok || hi[i] < lo[i] {
					continue
				}
				share := 0.5
				if hi[i] > lo[i] {
					share = (v - lo[i]) / (hi[i] - lo[i])
				}
				if minimised(m) {
					share = 1 - share
				}
				cmd := "L"
				if d.Len() == 0 {
					cmd = "M"
				}
				fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, marginL+float64(i)*step, bottom-share*(bottom-top))
			}
			colour, class := fadedColour, "faded"
			if front {
				colour, class = frontColour, "front"
			}
			c.Paths = append(c.Paths, path{D: strings.TrimSpace(d.String()), Stroke: colour, Fill: "none", Class: class, Title: t.ID})
		}
	}
	draw(false)
	draw(true) // on top
	c.Legend = []legendItem{{frontColour, "Pareto front"}, {fadedColour, "dominated or infeasible"}}
	return c
}
