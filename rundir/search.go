package rundir

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"

	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/spec"
)

// SearchSummary is what a run's search found, for report and the dashboard: its best trial,
// and, at the budget most trials reached (every trial of a bracket's first stage has a result
// there), each parameter's importance and its values beside the objective.
type SearchSummary struct {
	Best        *BestTrial          `json:"best,omitempty"`
	Budget      int                 `json:"budget"`
	Importances []search.Importance `json:"importances"`
	// Points are the results at Budget: each trial's configuration and objective.
	Points []SearchPoint `json:"-"`
}

// SearchPoint is one result at the summary's budget.
type SearchPoint struct {
	Params spec.Config
	Value  float64 // the objective as reported (not a loss)
}

// Search summarizes the run in v's search.
func Search(v *View) *SearchSummary {
	exp := v.State.Exp
	s := &SearchSummary{}
	if best, err := Best(v); err == nil {
		s.Best = best
	}
	events, _ := v.AllEvents() // a journal that cannot be read again has nothing to summarize
	obs, _ := observations(exp, exp, events)
	counts := map[int]int{}
	for _, o := range obs {
		if !math.IsInf(o.Loss, 0) {
			counts[o.Budget]++
		}
	}
	for b, n := range counts {
		if n > counts[s.Budget] || (n == counts[s.Budget] && b > s.Budget) {
			s.Budget = b
		}
	}
	var at []search.Observation
	for _, o := range obs {
		if o.Budget == s.Budget && !math.IsInf(o.Loss, 0) {
			at = append(at, o)
			value := o.Loss
			if exp.Objective.Mode == "max" {
				value = -value
			}
			s.Points = append(s.Points, SearchPoint{Params: o.Params, Value: value})
		}
	}
	s.Importances = search.Importances(exp.SearchSpace, at)
	return s
}

// WriteSearch writes what the search found as a person reads it: the best trial's learning
// curve, and each parameter's importance.
func WriteSearch(w io.Writer, s *SearchSummary) {
	if b := s.Best; b != nil && len(b.Curve) > 0 {
		var pts []string
		for _, p := range b.Curve {
			pts = append(pts, fmt.Sprintf("%d:%.4g", p.Iter, p.Value))
		}
		fmt.Fprintf(w, "best trial's %s by iteration: %s\n\n", b.Metric, strings.Join(pts, " "))
	}
	if len(s.Importances) == 0 || s.Importances[0].Results < 2 {
		return
	}
	fmt.Fprintf(w, "parameter importance (variance of the objective each parameter explains alone, at %d iterations, %d results):\n", s.Budget, s.Importances[0].Results)
	tw := format.NewTable(w, "PARAMETER", "SHARE")
	for _, imp := range s.Importances {
		tw.Row(imp.Param, fmt.Sprintf("%.1f%%", 100*imp.Share))
	}
	tw.Flush()
}
