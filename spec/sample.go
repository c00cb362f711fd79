package spec

import (
	"math"
	"math/rand/v2"
)

// Config is one trial's hyperparameters, by parameter name.
type Config map[string]any

// NewRand returns the generator every seeded computation of rubberband uses: PCG, whose output
// is the same on every machine and Go release. stream separates independent uses of one seed.
func NewRand(seed int64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

// SampleConfigs draws n configurations from a validated search space. Parameters are drawn in
// name order, so the same generator state gives the same configurations; every parameter is
// drawn, then the inactive ones are dropped (Prune), so that a condition does not change the
// draws of the parameters it does not touch.
func SampleConfigs(space map[string]Param, n int, r *rand.Rand) []Config {
	configs := make([]Config, n)
	for i := range configs {
		configs[i] = SampleConfig(space, r)
	}
	return configs
}

// SampleConfig draws one configuration (SampleConfigs).
func SampleConfig(space map[string]Param, r *rand.Rand) Config {
	names := sortedKeys(space)
	c := make(Config, len(names))
	for _, name := range names {
		c[name] = space[name].Sample(r)
	}
	return Prune(space, c)
}

// Sample draws one value of the parameter, uniformly (log-uniformly for loguniform).
func (p Param) Sample(r *rand.Rand) any {
	switch p.Type {
	case "uniform":
		return p.Min + r.Float64()*(p.Max-p.Min)
	case "loguniform":
		lo, hi := math.Log(p.Min), math.Log(p.Max)
		return math.Exp(lo + r.Float64()*(hi-lo))
	case "int":
		lo, hi := int64(p.Min), int64(p.Max)
		return lo + r.Int64N(hi-lo+1)
	default: // choice
		return p.Values[r.IntN(len(p.Values))]
	}
}
