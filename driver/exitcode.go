package driver

import (
	"errors"
	"fmt"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// The CLI's exit codes beside ExitPaused (4); `rubberband --help` lists them.
const (
	ExitError      = 1
	ExitInvalid    = 2 // input the user must change: a spec, a flag, a command, a run's name
	ExitInfeasible = 3 // no plan meets the deadline or the budget, before or during a run
	// ExitDeadlineMissed is a run that finished past its deadline: its result stands (the best
	// trial is reported), the promise it was planned for did not.
	ExitDeadlineMissed = 5
)

// ExitCode is the exit code of err: its own (CodedError), ExitPaused for a run an infrastructure fault paused, ExitInfeasible when no plan meets the deadline or
// the budget, ExitInvalid for input the user must change, else ExitError.
func ExitCode(err error) int {
	var coded *CodedError
	var problem *planner.ProblemError
	var overBudget *executor.BudgetError
	var paused *executor.PausedError
	switch {
	case errors.As(err, &coded):
		return coded.Code
	case errors.As(err, &paused):
		return ExitPaused
	case errors.Is(err, planner.ErrInfeasible), errors.Is(err, planner.ErrNoPlan), errors.As(err, &overBudget):
		return ExitInfeasible
	case errors.As(err, &problem), errors.Is(err, ErrInput),
		errors.Is(err, rundir.ErrNotRun), errors.Is(err, rundir.ErrSpec), errors.Is(err, rundir.ErrAmbiguous),
		errors.Is(err, rundir.ErrNoTrial), errors.Is(err, rundir.ErrHasRun), errors.Is(err, rundir.ErrSpecChange):
		return ExitInvalid
	}
	return ExitError
}

// CodedError is an error that carries its exit code; with no Err its words were said already.
type CodedError struct {
	Code int
	Err  error
}

func (e *CodedError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *CodedError) Unwrap() error { return e.Err }

// UsageError says what is wrong with a command's arguments: ExitInvalid.
func UsageError(format string, args ...any) error {
	return &CodedError{Code: ExitInvalid, Err: fmt.Errorf(format, args...)}
}
