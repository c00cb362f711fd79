package planner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

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
