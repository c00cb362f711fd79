package bench

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Each objective's result is given as it comes, in order; a chart that cannot be written is
// said apart, after the results; an objective that is none stops the suite as the user's error.
func TestSuiteRun(t *testing.T) {
	t.Parallel()
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := Suite{Objectives: []string{"branin"}, Samplers: []string{"random"}, Algorithm: "sha", Rounds: 1, Seeds: 1, Plots: blocked}
	var got []string
	results, plotErrs, err := s.Run(context.Background(), io.Discard, func(r Result) { got = append(got, r.Case) })
	if err != nil || len(results) != 1 || len(got) != 1 || got[0] != results[0].Case {
		t.Fatalf("Run: %v; results %d, given %v", err, len(results), got)
	}
	if len(plotErrs) != 1 {
		t.Fatalf("a chart into a file, not a folder: %v, want one error", plotErrs)
	}
	s.Objectives = []string{"nonesuch"}
	var oe *InputError
	if _, _, err := s.Run(context.Background(), io.Discard, func(Result) { t.Error("a result for no objective") }); !errors.As(err, &oe) {
		t.Fatalf("an unknown objective: %v, want an InputError", err)
	}
}

// A suite with no seeds or rounds, or an algorithm that is none, is the user's to change.
func TestSuiteCheck(t *testing.T) {
	t.Parallel()
	good := Suite{Algorithm: "sha", Rounds: 1, Seeds: 1}
	if err := good.Check(); err != nil {
		t.Fatalf("a good suite: %v", err)
	}
	for _, s := range []Suite{{Algorithm: "sha", Rounds: 1}, {Algorithm: "sha", Seeds: 1}, {Algorithm: "asha", Rounds: 1, Seeds: 1}} {
		var in *InputError
		if err := s.Check(); !errors.As(err, &in) {
			t.Errorf("%+v: %v, want an InputError", s, err)
		}
	}
}
