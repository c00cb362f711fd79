package driver

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
)

// Every kind of error has its exit code, wrapped or not; what no rule names exits 1.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"plain", errors.New("disk on fire"), ExitError},
		{"paused", fmt.Errorf("run: %w", &executor.PausedError{Fault: &executor.InfraError{Err: errors.New("full")}}), ExitPaused},
		{"infeasible", fmt.Errorf("plan: %w", planner.ErrInfeasible), ExitInfeasible},
		{"no plan", planner.ErrNoPlan, ExitInfeasible},
		{"over budget", fmt.Errorf("run: %w", &executor.BudgetError{Bracket: "b0"}), ExitInfeasible},
		{"spec problem", &planner.ProblemError{Err: errors.New("bad eta")}, ExitInvalid},
		{"input", inputErr("--time-scale must be above 0"), ExitInvalid},
		{"not a run", fmt.Errorf("open: %w", rundir.ErrNotRun), ExitInvalid},
		{"spec", rundir.ErrSpec, ExitInvalid},
		{"ambiguous", rundir.ErrAmbiguous, ExitInvalid},
		{"no trial", rundir.ErrNoTrial, ExitInvalid},
		{"has run", rundir.ErrHasRun, ExitInvalid},
		{"spec change", rundir.ErrSpecChange, ExitInvalid},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}
