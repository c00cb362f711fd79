package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/spec"
)

// ParseWhatIf reads `whatif`'s --sweep values (at least one) and its comma-separated --planners;
// what is wrong is a *ProblemError, the user's to change.
func ParseWhatIf(sweepArgs []string, planners string) ([]spec.Sweep, []string, error) {
	var sweeps []spec.Sweep
	for _, s := range sweepArgs {
		sw, err := spec.ParseSweep(s)
		if err != nil {
			return nil, nil, &ProblemError{Err: err}
		}
		sweeps = append(sweeps, sw)
	}
	if len(sweeps) == 0 {
		return nil, nil, &ProblemError{Err: fmt.Errorf("give at least one --sweep NAME=VALUES")}
	}
	names := strings.Split(planners, ",")
	for _, n := range names {
		if !slices.Contains(spec.PlannerNames(), n) {
			return nil, nil, &ProblemError{Err: fmt.Errorf("--planners: %q is not a planner (%s)", n, strings.Join(spec.PlannerNames(), ", "))}
		}
	}
	return sweeps, names, nil
}
