package planner

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/spec"
)

// WhatIf is what `rubberband whatif` reports, its JSON: each planner's outcome at every point of
// a grid of spec changes.
type WhatIf struct {
	Experiment string   `json:"experiment"`
	Sweeps     []string `json:"sweeps"`
	Planners   []string `json:"planners"`
	// SavingAgainst is what a point's saving is against: the static plan, or an ASHA job's
	// fixed slots.
	SavingAgainst string        `json:"saving_against"`
	Points        []WhatIfPoint `json:"points"`
}

// WhatIfPoint is one grid point: the swept values as given, and each planner's outcome, or why
// the point has none.
type WhatIfPoint struct {
	Params  map[string]string  `json:"params"`
	Results map[string]Outcome `json:"results"`
	Error   string             `json:"error,omitempty"`
	Values  spec.Point         `json:"-"` // the swept values, in the order of the sweeps
}

// RunWhatIf compares the planners names at every point of the grid of sweeps over the spec
// src (Sweep, on every CPU): src's text with each point's values put in, its profile files
// taken from src, samples Monte Carlo samples per prediction when above 0. Every point's spec is
// checked before any is planned: a bad value is a ProblemError naming the point. A point that
// cannot be planned keeps its error and the others go on. progress is Sweep's. An ASHA job's
// points compare its elastic schedule, fixed slots and synchronous SHA (CompareASHA) instead of
// names; a grid that is ASHA at some points and not at others is a ProblemError.
func RunWhatIf(ctx context.Context, src *spec.Source, sweeps []spec.Sweep, names []string, samples int, progress func(done, total int)) (*WhatIf, error) {
	dir := filepath.Dir(src.Path)
	read := func(ref string) ([]byte, error) {
		if b, ok := src.Files[ref]; ok {
			return b, nil
		}
		if !filepath.IsAbs(ref) {
			ref = filepath.Join(dir, ref)
		}
		return spec.ReadFile(ref) // a file a swept value names
	}
	grid := spec.Grid(sweeps)
	exps := make([]*spec.Experiment, len(grid))
	for i, pt := range grid {
		exp, err := spec.ApplyPoint(src.Path, src.Data, read, sweeps, pt)
		if err != nil {
			return nil, &ProblemError{fmt.Errorf("at %s: %w", Describe(sweeps, pt), err)}
		}
		if samples > 0 {
			exp.Planner.Samples = samples
		}
		exps[i] = exp
	}
	against := spec.PlannerStatic
	if exps[0].Algorithm.IsASHA() {
		names, against = ASHAOutcomes(), ASHAFixed
	}
	for i, exp := range exps {
		if exp.Algorithm.IsASHA() != exps[0].Algorithm.IsASHA() {
			return nil, &ProblemError{fmt.Errorf("at %s: the sweep turns the job from or to asha: whatif compares the same algorithm at every point", Describe(sweeps, grid[i]))}
		}
	}
	out := &WhatIf{Experiment: exps[0].Name, Planners: names, SavingAgainst: against, Points: make([]WhatIfPoint, len(grid))}
	for _, sw := range sweeps {
		out.Sweeps = append(out.Sweeps, sw.Name)
	}
	for i, p := range Sweep(ctx, exps, names, 0, progress) {
		pt := WhatIfPoint{Params: map[string]string{}, Results: p.Results, Values: grid[i]}
		for k, sw := range sweeps {
			pt.Params[sw.Name] = grid[i][k]
		}
		if p.Err != nil { // the row names the point
			pt.Error = errors.Unwrap(p.Err).Error()
		}
		out.Points[i] = pt
	}
	return out, nil
}

// Describe names a point of a grid of sweeps: NAME=VALUE NAME=VALUE.
func Describe(sweeps []spec.Sweep, pt spec.Point) string {
	parts := make([]string, len(sweeps))
	for i, sw := range sweeps {
		parts[i] = sw.Name + "=" + pt[i]
	}
	return strings.Join(parts, " ")
}

// WriteTable prints the grid as `whatif` shows it: a row a point, a column a planner (mean cost
// in mean JCT), the saving, and each point's error in full.
func (out *WhatIf) WriteTable(w io.Writer, sweeps []spec.Sweep) {
	cols := append([]string(nil), out.Sweeps...)
	for _, n := range out.Planners {
		cols = append(cols, strings.ToUpper(n))
	}
	cols = append(cols, "SAVING")
	var buf bytes.Buffer
	t := format.NewTable(&buf, cols...)
	for _, p := range out.Points {
		row := make([]any, 0, len(cols))
		for _, v := range p.Values {
			row = append(row, v)
		}
		for _, n := range out.Planners {
			o, ok := p.Results[n]
			switch {
			case p.Error != "":
				row = append(row, "error")
			case !ok:
				row = append(row, "no plan")
			case !o.Feasible:
				row = append(row, "misses ("+format.Clock(o.Predicted.JCT.P50)+")")
			case o.ASHA != nil:
				row = append(row, fmt.Sprintf("%s in %s (%s)", format.Money(o.Predicted.Cost.Mean), format.Clock(o.Predicted.JCT.Mean), o.ASHA))
			default:
				row = append(row, fmt.Sprintf("%s in %s", format.Money(o.Predicted.Cost.Mean), format.Clock(o.Predicted.JCT.Mean)))
			}
		}
		best := "—"
		for _, n := range []string{spec.PlannerOptimal, spec.PlannerGreedy, ASHAElastic} {
			if o, ok := p.Results[n]; ok && o.SavingPct != nil {
				best = fmt.Sprintf("%.0f%% (%s)", *o.SavingPct, n)
				break
			}
		}
		row = append(row, best)
		t.Row(row...)
	}
	t.Flush()
	w.Write(buf.Bytes())
	for _, p := range out.Points { // each error said in full, by its point
		if p.Error != "" {
			fmt.Fprintf(w, "error at %s: %s\n", Describe(sweeps, p.Values), p.Error)
		}
	}
	against := "the best static cluster"
	if out.SavingAgainst == ASHAFixed {
		against = "the best fixed number of slots (asha-fixed), with the GPU schedules in brackets"
	}
	fmt.Fprintf(w, "\ncells: mean cost in mean JCT; 'misses' gives the fastest plan's p50 JCT; SAVING is against %s\n", against)
}

// WriteCSV writes the grid a row per point and planner, with the prediction's quantiles.
func (out *WhatIf) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := append(append([]string(nil), out.Sweeps...), "planner", "feasible", "jct_mean_s", "jct_p5_s", "jct_p50_s", "jct_p95_s",
		"cost_mean_usd", "cost_p5_usd", "cost_p50_usd", "cost_p95_usd", "deadline_miss_prob", "saving_pct")
	cw.Write(head)
	for _, p := range out.Points {
		for _, n := range out.Planners {
			o, ok := p.Results[n]
			row := append([]string(nil), p.Values...)
			if !ok {
				cw.Write(append(row, n, "no plan"))
				continue
			}
			saving := ""
			if o.SavingPct != nil {
				saving = fmt.Sprintf("%.3f", *o.SavingPct)
			}
			j, k := o.Predicted.JCT, o.Predicted.Cost
			cw.Write(append(row, n, fmt.Sprint(o.Feasible), csvFloat(j.Mean), csvFloat(j.P5), csvFloat(j.P50), csvFloat(j.P95), csvFloat(k.Mean), csvFloat(k.P5), csvFloat(k.P50), csvFloat(k.P95),
				csvFloat(o.Predicted.DeadlineMissProb), saving))
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvFloat(x float64) string { return fmt.Sprintf("%.4f", x) }
