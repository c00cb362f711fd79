package search

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Observation is one result: a configuration's loss (lower is better: the objective, negated
// when it is maximised) after Budget iterations. A trial that failed or reported no objective
// has loss +Inf: it counts among the bad.
type Observation struct {
	Params spec.Config
	Budget int
	Loss   float64
	// Trial, where set, names the configuration for as long as the sampler lives: a TPE that
	// draws again encodes it once (a trial's configuration never changes). Not persisted.
	Trial string `json:"-"`
	// Losses and Violation are a multi-objective spec's result (Losses: one per objective, as
	// search.Losses gives them; nil with one objective, where Loss is the result).
	Losses    []float64
	Violation float64
}

// Loss turns an objective value into a loss: the objective negated when mode is max; NaN (no
// value) is +Inf.
func Loss(metric float64, mode string) float64 {
	switch {
	case math.IsNaN(metric):
		return math.Inf(1)
	case mode == "max":
		return -metric
	default:
		return metric
	}
}

// Initial returns the configurations of bracket b's n trials for a sampler that does not learn
// (random, grid, sobol), the same for the same spec every time; first is the number of trials
// of the brackets before b (the sequence's offset). Random draws what runs always drew: bracket
// b's trials from the seed's stream b.
func Initial(exp *spec.Experiment, b, first, n int) ([]spec.Config, error) {
	space, seed := exp.SearchSpace, exp.SamplerSeed()
	switch exp.Sampler.Name {
	case spec.SamplerRandom, "":
		return spec.SampleConfigs(space, n, spec.NewRand(seed, uint64(b))), nil
	case spec.SamplerGrid:
		grid := spec.GridConfigs(space, exp.Sampler.GridPoints, n)
		if len(grid) != n {
			return nil, fmt.Errorf("search: the grid holds %d configurations, bracket %d asks for %d", len(grid), b+1, n)
		}
		return grid, nil
	case spec.SamplerSobol:
		s := NewSobol(len(spec.ParamOrder(space)), seed)
		out := make([]spec.Config, n)
		for i := range out {
			out[i] = Decode(space, s.Point(uint32(first+i)))
		}
		return out, nil
	}
	return nil, fmt.Errorf("search: sampler %q draws at launch, not at the start", exp.Sampler.Name)
}

// TrialRand is the generator of one trial's draw: the sampler's seed and the trial's index in the
// run, whatever order trials are launched in and however many drivers the run had.
func TrialRand(seed int64, trial int) *rand.Rand {
	return spec.NewRand(seed, 1<<32|uint64(trial))
}
