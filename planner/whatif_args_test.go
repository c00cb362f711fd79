package planner

import (
	"errors"
	"strings"
	"testing"
)

// whatif needs a sweep, sweeps it can read and planners there are; each refusal is the user's.
func TestParseWhatIf(t *testing.T) {
	t.Parallel()
	sweeps, names, err := ParseWhatIf([]string{"deadline=30m,1h"}, "static,greedy")
	if err != nil || len(sweeps) != 1 || strings.Join(names, " ") != "static greedy" {
		t.Fatalf("a good sweep: %v, %v, %v", sweeps, names, err)
	}
	for _, tc := range []struct {
		sweeps   []string
		planners string
		want     string
	}{
		{nil, "static", "give at least one --sweep"},
		{[]string{"deadline=30m"}, "static,clever", `--planners: "clever" is not a planner`},
		{[]string{"no equals sign"}, "static", ""},
	} {
		_, _, err := ParseWhatIf(tc.sweeps, tc.planners)
		var pe *ProblemError
		if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want a ProblemError %q", tc.sweeps, tc.planners, err, tc.want)
		}
	}
}
