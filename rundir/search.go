package rundir

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/journal"
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
	// ByObjective is a multi-objective run's importances for each objective in turn (those
	// above are its first objective's).
	ByObjective []ObjectiveImportances `json:"importances_by_objective,omitempty"`
}

// ObjectiveImportances is each parameter's importance for one objective.
type ObjectiveImportances struct {
	Metric      string              `json:"metric"`
	Importances []search.Importance `json:"importances"`
}

// SearchPoint is one result at the summary's budget.
type SearchPoint struct {
	Params spec.Config
	Value  float64 // the objective as reported (not a loss)
}

// Search summarizes the run in v's search.
func Search(v *View) *SearchSummary {
	f, curves := NewSearchFold(v.State.Exp), NewCurveFold(v.State.Exp)
	events, err := v.AllEvents()
	for _, e := range events {
		f.Apply(e)
		curves.Apply(e)
	}
	s := f.Summary(v, curves)
	if err != nil { // a journal that cannot be read again has nothing to summarize
		s.Best = nil
	}
	return s
}

// SearchFold keeps what Search summarizes as a run's journal is read, one event at a time: a
// reader that follows the journal (the dashboard) summarizes without keeping the events.
type SearchFold struct {
	exp *spec.Experiment
	obs *obsFold
	// at is the summary of obs's first n observations (they are only appended): a summary asked
	// again with none new is not measured again.
	at *SearchSummary
	n  int
}

// NewSearchFold is the search of exp's run before any event.
func NewSearchFold(exp *spec.Experiment) *SearchFold {
	return &SearchFold{exp: exp, obs: newObsFold(exp, exp)}
}

// Apply folds the event that follows those already applied.
func (f *SearchFold) Apply(e journal.Event) { f.obs.apply(e) }

// Summary is what the search found as of the events applied: v is the same run's view (its
// best trial), curves its learning curves (the best trial's curve). Its Points and Importances
// are shared with the fold's later summaries: read them, do not change them.
func (f *SearchFold) Summary(v *View, curves *CurveFold) *SearchSummary {
	if f.at == nil || f.n != len(f.obs.out) {
		f.at, f.n = f.measure(), len(f.obs.out)
	}
	s := *f.at
	if best, err := bestOf(v, curves); err == nil {
		s.Best = best
	}
	return &s
}

// measure finds the budget most results reached, and each parameter's importance there.
func (f *SearchFold) measure() *SearchSummary {
	s := &SearchSummary{}
	counts := map[int]int{}
	for _, o := range f.obs.out {
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
	for _, o := range f.obs.out {
		if o.Budget == s.Budget && !math.IsInf(o.Loss, 0) {
			at = append(at, o)
			value := o.Loss
			if f.exp.Objective.Mode == "max" {
				value = -value
			}
			s.Points = append(s.Points, SearchPoint{Params: o.Params, Value: value})
		}
	}
	s.Importances = search.Importances(f.exp.SearchSpace, at)
	if len(f.exp.Objectives) > 1 {
		for i, o := range f.exp.Objectives {
			var each []search.Observation
			for _, ob := range at {
				if i < len(ob.Losses) && !math.IsInf(ob.Losses[i], 0) {
					ob.Loss = ob.Losses[i]
					each = append(each, ob)
				}
			}
			s.ByObjective = append(s.ByObjective, ObjectiveImportances{Metric: o.Metric, Importances: search.Importances(f.exp.SearchSpace, each)})
		}
	}
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
	if len(s.ByObjective) > 0 { // a column per objective
		fmt.Fprintf(w, "parameter importance (variance of each objective each parameter explains alone, at %d iterations, %d results):\n", s.Budget, s.Importances[0].Results)
		cols := []string{"PARAMETER"}
		share := map[string][]string{}
		for _, o := range s.ByObjective {
			cols = append(cols, strings.ToUpper(o.Metric))
			for _, imp := range o.Importances {
				share[imp.Param] = append(share[imp.Param], fmt.Sprintf("%.1f%%", 100*imp.Share))
			}
		}
		tw := format.NewTable(w, cols...)
		for _, imp := range s.ByObjective[0].Importances {
			row := []any{imp.Param}
			for _, v := range share[imp.Param] {
				row = append(row, v)
			}
			tw.Row(row...)
		}
		tw.Flush()
		return
	}
	fmt.Fprintf(w, "parameter importance (variance of the objective each parameter explains alone, at %d iterations, %d results):\n", s.Budget, s.Importances[0].Results)
	tw := format.NewTable(w, "PARAMETER", "SHARE")
	for _, imp := range s.Importances {
		tw.Row(imp.Param, fmt.Sprintf("%.1f%%", 100*imp.Share))
	}
	tw.Flush()
}
