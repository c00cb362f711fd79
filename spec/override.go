package spec

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Overrides are settings a command line puts over a spec's, each checked and named by its
// flag; nil keeps the spec's.
type Overrides struct {
	Deadline *string  // a Go duration above 0
	Quantile *float64 // in (0, 1]: planner.deadline_quantile
	Samples  *int     // 1 to MaxSamples: planner.samples
	Seed     *int64
	Planner  *string // one of PlannerNames: planner.name
}

// Override puts o over exp; a setting out of range is an error that names its flag.
func (exp *Experiment) Override(o Overrides) error {
	if o.Deadline != nil {
		d, err := time.ParseDuration(*o.Deadline)
		if err != nil || d <= 0 {
			return fmt.Errorf("--deadline %q is not a positive Go duration such as 30m", *o.Deadline)
		}
		exp.Deadline = Duration(d)
	}
	if q := o.Quantile; q != nil {
		if !(*q > 0 && *q <= 1) {
			return fmt.Errorf("--quantile %v is not in (0, 1]", *q)
		}
		exp.Planner.DeadlineQuantile = *q
	}
	if n := o.Samples; n != nil {
		if *n < 1 || *n > MaxSamples {
			return fmt.Errorf("--samples %d is out of range (1 to %d)", *n, MaxSamples)
		}
		exp.Planner.Samples = *n
	}
	if o.Seed != nil {
		exp.Seed = *o.Seed
	}
	if name := o.Planner; name != nil {
		if !slices.Contains(PlannerNames(), *name) {
			return fmt.Errorf("--planner %q is not a planner (%s)", *name, strings.Join(PlannerNames(), ", "))
		}
		exp.Planner.Name = *name
	}
	return nil
}
