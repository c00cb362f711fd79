package rundir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/clock"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"go.yaml.in/yaml/v3"
)

// What status, report and best print is rendered here, once, for the CLI on this machine's runs
// and for a server on its own (which sends the CLI the bytes): the two print the same.

// StatusOptions say how a run's status is drawn: as tables (with a row per trial when Trials)
// or as JSON (on one line when Compact, for a stream of states).
type StatusOptions struct {
	JSON, Compact, Trials bool
}

// StatusJSON is `status -o json`: the run's report, and where the run is.
type StatusJSON struct {
	*runstate.Report
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
	Live   bool   `json:"live"`
}

// RenderStatus draws the run in v as `status` prints it.
func RenderStatus(v *View, o StatusOptions) ([]byte, error) {
	st := v.State
	status, why := v.Status()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if !o.Compact {
		enc.SetIndent("", "  ")
	}
	if v.Res == nil {
		if o.JSON { // one line, as it always was: there is little to show
			err := json.NewEncoder(&buf).Encode(StatusJSON{Report: &runstate.Report{Outcome: runstate.Outcome{Experiment: st.Exp.Name, RunID: st.Run.RunID}}, Status: status, Live: v.Live})
			return buf.Bytes(), err
		}
		fmt.Fprintf(&buf, "%s · run %s · %s · state in %s\n", st.Exp.Name, st.Run.RunID, status, st.Dir)
		return buf.Bytes(), nil
	}
	if o.JSON {
		rep := runstate.Compare(st.Plan, v.Res)
		err := enc.Encode(StatusJSON{Report: &rep, Status: status, Why: why, Live: v.Live})
		return buf.Bytes(), err
	}
	if why != "" {
		status += ": " + why
	}
	WriteTable(&buf, st, v.Res, status)
	if o.Trials {
		fmt.Fprintln(&buf)
		WriteTrials(&buf, st, v.Res)
	}
	return buf.Bytes(), nil
}

// EndStatus is the word for how a replayed run stands at its journal's end.
func EndStatus(res *runstate.Result) string {
	switch {
	case res.Cancelled != "":
		return "cancelled"
	case !res.Finished:
		return "not finished"
	}
	if by, missed := runstate.MissedDeadline(res); missed {
		return "finished: DEADLINE MISSED by " + format.Clock(by)
	}
	return "finished"
}

// Replayed is a run's journal replayed to its end, as report shows it: its result, the events
// it was replayed from, and what its search found.
type Replayed struct {
	State  *State
	Res    *runstate.Result
	Events []journal.Event
	Search *SearchSummary
}

// Replay replays the run in st's journal to its end.
func Replay(st *State) (*Replayed, error) {
	events, err := journal.ReadJournal(filepath.Join(st.Dir, Journal))
	if err != nil {
		return nil, err
	}
	res, err := runstate.Replay(st.RunPlan(), events, clock.Wall{}.Now())
	if err != nil {
		return nil, err
	}
	return replayed(st, res, events), nil
}

// replayed is the run in st whose journal's events came to res.
func replayed(st *State, res *runstate.Result, events []journal.Event) *Replayed {
	return &Replayed{State: st, Res: res, Events: events, Search: Search(&View{State: st, Res: res, Events: events})}
}

// ReportJSON is `report -o json`: realized against predicted, and what the search found.
type ReportJSON struct {
	*runstate.Report
	Search *SearchSummary `json:"search"`
}

// WriteReport writes the run as `report` prints it: its tables and what its search found, or
// with asJSON its ReportJSON.
func (r *Replayed) WriteReport(w io.Writer, asJSON bool) error {
	if asJSON {
		rep := runstate.Compare(r.State.Plan, r.Res)
		return format.JSON(w, ReportJSON{&rep, r.Search})
	}
	var buf bytes.Buffer
	WriteTable(&buf, r.State, r.Res, EndStatus(r.Res))
	fmt.Fprintln(&buf)
	WriteSearch(&buf, r.Search)
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteBest writes the best configuration as `best` prints it: YAML ready to reuse, under a
// comment that says whose it is, or with asJSON the trial with its metric and learning curve.
func WriteBest(w io.Writer, best *BestTrial, asJSON bool) error {
	if asJSON {
		return format.JSON(w, best)
	}
	if len(best.Objectives) > 0 {
		return writePareto(w, best)
	}
	fmt.Fprintf(w, "# %s, run %s: trial %s, %s %g at iteration %d\n", best.Experiment, best.RunID, best.Trial, best.Metric, best.Value, best.Iter)
	b, err := yaml.Marshal(best.Params)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writePareto writes a multi-objective run's Pareto front as a table: each configuration's
// objectives (an arrow says which way is better), constrained metrics and parameters, in
// promotion's order, with how to pick one.
func writePareto(w io.Writer, best *BestTrial) error {
	fmt.Fprintf(w, "%s, run %s: the Pareto front, %d configuration(s) at iteration %d\n", best.Experiment, best.RunID, len(best.Pareto), paretoIter(best))
	if len(best.Pareto) == 0 {
		fmt.Fprintln(w, "no feasible configuration yet: none satisfies the spec's constraints")
		return nil
	}
	var metrics, params []string
	cols := []string{"TRIAL"}
	for _, o := range best.Objectives {
		metrics = append(metrics, o.Metric)
		cols = append(cols, strings.ToUpper(o.Metric)+map[string]string{"max": " ↑", "min": " ↓"}[o.Mode])
	}
	var constrained []string // the constrained metrics that are no objective, by name
	for _, m := range best.Pareto {
		for name := range m.Metrics {
			if !slices.Contains(metrics, name) && !slices.Contains(constrained, name) {
				constrained = append(constrained, name)
			}
		}
		for name := range m.Params {
			if !slices.Contains(params, name) {
				params = append(params, name)
			}
		}
	}
	slices.Sort(constrained)
	slices.Sort(params)
	for _, name := range constrained {
		metrics = append(metrics, name)
		cols = append(cols, strings.ToUpper(name))
	}
	cols = append(cols, params...)
	tab := format.NewTable(w, cols...)
	for _, m := range best.Pareto {
		row := []any{m.Trial}
		for _, name := range metrics {
			if v, ok := m.Metrics[name]; ok {
				row = append(row, fmt.Sprintf("%.4g", v))
			} else {
				row = append(row, "-")
			}
		}
		for _, p := range params {
			row = append(row, fmt.Sprint(m.Params[p]))
		}
		tab.Row(row...)
	}
	tab.Flush()
	fmt.Fprintf(w, "\nbest --pick %s prints one configuration ready to reuse; -o json gives each one's curve\n", best.Objectives[0].Metric)
	return nil
}

// paretoIter is the iteration the front's results are at.
func paretoIter(best *BestTrial) int {
	if len(best.Pareto) > 0 {
		return best.Pareto[0].Iter
	}
	return best.Iter
}
