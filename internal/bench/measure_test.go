package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Measure compares what RunAll ran, sampler by sampler at the comparison's budgets, and says its
// progress on the log.
func TestMeasure(t *testing.T) {
	c := Case{Objective: "branin", Algorithm: "sha"}
	var log bytes.Buffer
	r, trajs, err := Measure(context.Background(), c, []string{"random", "tpe"}, 2, nil, &log)
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 4 || r.Case != c.String() || r.Seeds != 2 || r.Iters == 0 || len(r.Summaries) != 2 {
		t.Fatalf("%d trajectories; result %s, %d seeds, %d iterations, %d samplers", len(trajs), r.Case, r.Seeds, r.Iters, len(r.Summaries))
	}
	for i, want := range []string{"random", "tpe"} {
		if s := r.Summaries[i]; s.Sampler != want || len(s.Iters) != comparePoints {
			t.Errorf("summary %d: %s at %d budgets, want %s at %d", i, s.Sampler, len(s.Iters), want, comparePoints)
		}
	}
	if !strings.Contains(log.String(), "4 of 4 runs") || !strings.HasSuffix(log.String(), "\n") {
		t.Errorf("progress: %q", log.String())
	}
}
