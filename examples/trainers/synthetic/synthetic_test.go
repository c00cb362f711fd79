package synthetic

import "testing"

// RB_SYNTH_SLOWDOWN slows every iteration from RB_SYNTH_SLOWDOWN_FROM_ITER on, and nothing before;
// a factor of 1 or less, or none, changes nothing.
func TestSlowdownFromAnIteration(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want []float64 // iterations 1 to 4
	}{
		{Options{Slowdown: 1.3, SlowdownFromIter: 3}, []float64{1, 1, 1.3, 1.3}},
		{Options{Slowdown: 2}, []float64{2, 2, 2, 2}},
		{Options{Slowdown: 0.5, SlowdownFromIter: 2}, []float64{1, 1, 1, 1}},
		{Options{}, []float64{1, 1, 1, 1}},
	} {
		for i, want := range tc.want {
			if got := tc.o.latencyFactor(i + 1); got != want {
				t.Errorf("%+v: iteration %d slowed %v times, want %v", tc.o, i+1, got, want)
			}
		}
	}
}
