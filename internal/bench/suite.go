package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
)

// Suite is one `rubberband search-bench`: every sampler on every objective, over Seeds seeds
// each, compared with Optuna's trajectories from OptunaDir where it is given (OptunaScript runs
// for one it lacks), a regret chart per objective written into the folder Plots where it is.
type Suite struct {
	Objectives, Samplers    []string
	Algorithm               string
	Rounds, Seeds           int
	OptunaDir, OptunaScript string
	Plots                   string
}

// InputError is a suite the user must change: a count below 1, an algorithm or an objective
// that is none.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Check says what is wrong with the suite's seeds, rounds and algorithm, as an *InputError.
func (s Suite) Check() error {
	if s.Seeds < 1 || s.Rounds < 1 {
		return &InputError{Err: errors.New("--seeds and --rounds must be at least 1")}
	}
	if s.Algorithm != "hyperband" && s.Algorithm != "sha" {
		return &InputError{Err: fmt.Errorf("--algorithm %q: hyperband or sha", s.Algorithm)}
	}
	return nil
}

// Run measures the objectives in turn, giving done each one's result as it comes. A chart that
// cannot be written is returned apart (plotErrs), once every objective is measured: the results
// come first, never lost to it.
func (s Suite) Run(ctx context.Context, log io.Writer, done func(Result)) (results []Result, plotErrs []error, err error) {
	for _, name := range s.Objectives {
		if _, err := objective.Lookup(name); err != nil {
			return nil, nil, &InputError{Err: err}
		}
		var optuna *OptunaSource
		if s.OptunaDir != "" {
			self, err := os.Executable() // it answers the objective's queries for Optuna's script
			if err != nil {
				return nil, nil, err
			}
			optuna = &OptunaSource{Dir: s.OptunaDir, Script: s.OptunaScript, Evaluator: self, Seeds: s.Seeds}
		}
		r, trajs, err := Measure(ctx, Case{Objective: name, Algorithm: s.Algorithm, Rounds: s.Rounds}, s.Samplers, s.Seeds, optuna, log)
		if err != nil {
			return nil, nil, err
		}
		results = append(results, r)
		done(r)
		if s.Plots != "" {
			if err := Regret(filepath.Join(s.Plots, "search-"+name+".png"), r, trajs); err != nil {
				plotErrs = append(plotErrs, fmt.Errorf("--plots: %w", err))
			}
		}
	}
	return results, plotErrs, nil
}
