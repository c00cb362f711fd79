package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/safefile"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/spec"
)

// WarmStartFile holds the results a run's sampler was warm-started with, resolved once when
// the run first started: a resumed run learns from the same results whatever became of the
// runs they came from.
const WarmStartFile = "warm_start.json"

// WarmStart is what the runs a spec's sampler.warm_start names give its model.
type WarmStart struct {
	Observations []search.Observation `json:"observations"`
	// Notes say, per run, what it gives and what of it is ignored (parameters this space lacks
	// or whose values it does not take): what validate prints.
	Notes []string `json:"notes"`
}

// ResolveWarmStart reads the results of the runs exp's sampler.warm_start names under root.
// A run that does not exist, or optimised another metric, is an error matching ErrNotRun or
// ErrSpec.
func ResolveWarmStart(root string, exp *spec.Experiment) (*WarmStart, error) {
	ws := &WarmStart{Observations: []search.Observation{}}
	for _, name := range exp.Sampler.WarmStart {
		dir, err := Resolve(root, name)
		if err != nil {
			return nil, fmt.Errorf("sampler.warm_start: %w", err)
		}
		st, err := Open(dir)
		if err != nil {
			return nil, fmt.Errorf("sampler.warm_start: %s: %w", name, err)
		}
		if st.Exp.Objective.Metric != exp.Objective.Metric {
			return nil, fmt.Errorf("sampler.warm_start: %w: run %s optimised %q, this spec %q", ErrSpec, name, st.Exp.Objective.Metric, exp.Objective.Metric)
		}
		events, err := journal.ReadJournal(filepath.Join(dir, Journal))
		if err != nil {
			return nil, fmt.Errorf("sampler.warm_start: %s: %w", name, err)
		}
		obs, ignored := observations(st.Exp, exp, events)
		note := fmt.Sprintf("warm start: run %s (%s) gives %d results", name, st.Run.RunID, len(obs))
		if len(ignored) > 0 {
			note += "; ignores " + strings.Join(ignored, ", ")
		}
		ws.Notes = append(ws.Notes, note)
		ws.Observations = append(ws.Observations, obs...)
	}
	return ws, nil
}

// observations are the results a run's journal holds, in the terms of exp's search space: each
// trial's objective at the end of each stage it reached (+Inf where it gave up), as a loss under
// exp's mode (the same metric, whichever way the run that measured it went); ignored says which
// parameters exp's space drops.
func observations(from, exp *spec.Experiment, events []journal.Event) ([]search.Observation, []string) {
	f := newObsFold(from, exp)
	for _, e := range events {
		f.apply(e)
	}
	return f.out, f.ignored()
}

// obsFold gathers observations as a journal is read, one event at a time.
type obsFold struct {
	brackets []spec.Bracket
	exp      *spec.Experiment
	params   map[string]spec.Config
	dropped  map[string]string
	out      []search.Observation
}

func newObsFold(from, exp *spec.Experiment) *obsFold {
	return &obsFold{brackets: from.Algorithm.Brackets(), exp: exp, params: map[string]spec.Config{}, dropped: map[string]string{}}
}

// apply folds one event; it says whether an observation was added.
func (f *obsFold) apply(e journal.Event) bool {
	if e.Bracket < 0 || e.Bracket >= len(f.brackets) {
		return false
	}
	switch e.Ev {
	case journal.EvTrial, journal.EvLaunch:
		if e.Params != nil {
			f.params[e.Trial] = shared(e.Params, f.exp.SearchSpace, f.dropped)
		}
	case journal.EvDone, journal.EvFail:
		c, ok := f.params[e.Trial]
		stages := f.brackets[e.Bracket].Stages
		if !ok || e.Stage < 0 || e.Stage >= len(stages) || (e.Ev == journal.EvFail && !e.GaveUp) {
			return false
		}
		metric := math.NaN()
		if e.Ev == journal.EvDone && e.Metric != nil {
			metric = *e.Metric
		}
		o := search.Observation{Params: c, Budget: stages[e.Stage].EndIter(), Loss: search.Loss(metric, f.exp.Objective.Mode)}
		if f.exp.MultiObjective() { // this spec's objectives, of what that run's trainers reported
			var reported map[string]float64
			if e.Ev == journal.EvDone {
				reported = e.Metrics
			}
			o.Losses, o.Violation = search.Losses(f.exp, reported)
		}
		f.out = append(f.out, o)
		return true
	}
	return false
}

// ignored says which parameters the fold's space dropped, and why.
func (f *obsFold) ignored() []string {
	var ignored []string
	for _, name := range slices.Sorted(mapKeys(f.dropped)) {
		ignored = append(ignored, name+" ("+f.dropped[name]+")")
	}
	return ignored
}

// shared keeps the parameters of c that space has, with values it takes; dropped learns why
// the others went.
func shared(c spec.Config, space map[string]spec.Param, dropped map[string]string) spec.Config {
	out := spec.Config{}
	for name, v := range c {
		p, ok := space[name]
		switch {
		case !ok:
			dropped[name] = "not in this search space"
		case p.Type == "choice" && !slices.ContainsFunc(p.Values, func(w any) bool { return spec.SameValue(v, w) }):
			dropped[name] = "a value this choice does not take"
		case p.Type != "choice" && !isNumber(v):
			dropped[name] = "not a number here"
		default:
			out[name] = v
		}
	}
	return out
}

func isNumber(v any) bool {
	_, ok := search.Number(v)
	return ok
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// LoadWarmStart returns the warm start of the run in dir: what it was started with, or, the
// first time, what root's runs give now (then kept in dir).
func LoadWarmStart(dir, root string, exp *spec.Experiment) (*WarmStart, error) {
	path := filepath.Join(dir, WarmStartFile)
	b, err := os.ReadFile(path)
	if err == nil {
		var ws WarmStart
		if err := json.Unmarshal(b, &ws); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &ws, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	ws, err := ResolveWarmStart(root, exp)
	if err != nil {
		return nil, err
	}
	b, err = json.Marshal(ws)
	if err != nil {
		return nil, err
	}
	return ws, safefile.Write(path, b, FileMode)
}
