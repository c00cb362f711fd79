package spec

import (
	"strings"
	"testing"
	"time"
)

// Overrides land on the spec's fields; one out of range is refused in its flag's words, and
// nothing set leaves the spec as it was.
func TestOverride(t *testing.T) {
	deadline, quantile, samples, seed, planner := "45m", 0.9, 50, int64(7), PlannerNames()[0]
	exp := &Experiment{}
	if err := exp.Override(Overrides{Deadline: &deadline, Quantile: &quantile, Samples: &samples, Seed: &seed, Planner: &planner}); err != nil {
		t.Fatal(err)
	}
	if exp.Deadline != Duration(45*time.Minute) || exp.Planner.DeadlineQuantile != 0.9 || exp.Planner.Samples != 50 || exp.Seed != 7 || exp.Planner.Name != planner {
		t.Errorf("overridden: %+v", exp)
	}
	before := *exp
	if err := exp.Override(Overrides{}); err != nil || exp.Deadline != before.Deadline || exp.Planner != before.Planner || exp.Seed != before.Seed {
		t.Errorf("no overrides: %v, %+v", err, exp)
	}
	bad, zero, big, none := "-3m", 0.0, MaxSamples+1, "guess"
	for _, tc := range []struct {
		o    Overrides
		want string
	}{
		{Overrides{Deadline: &bad}, `--deadline "-3m" is not a positive Go duration`},
		{Overrides{Quantile: &zero}, "--quantile 0 is not in (0, 1]"},
		{Overrides{Samples: &big}, "--samples 100001 is out of range"},
		{Overrides{Planner: &none}, `--planner "guess" is not a planner`},
	} {
		if err := (&Experiment{}).Override(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}
