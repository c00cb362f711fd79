package spec

import (
	"fmt"
	"strings"
)

// Samplers: how trials' configurations are drawn (package search draws them).
const (
	SamplerRandom = "random" // uniformly at random, each parameter on its own (the default)
	SamplerGrid   = "grid"   // every reachable combination of each parameter's grid values
	SamplerSobol  = "sobol"  // a scrambled Sobol sequence: random, but spread evenly
	SamplerTPE    = "tpe"    // BOHB's tree-structured Parzen estimator, fitted on the results so far
)

// Sampler is the spec's sampler block. Options apply to the sampler that names them only.
type Sampler struct {
	Name string `yaml:"name"`
	// Seed, when given, seeds the sampler apart from the experiment's seed (which the simulator
	// and the synthetic trainer's draws use): another search over the same job.
	Seed *int64 `yaml:"seed"`
	// GridPoints is how many evenly spaced values each numeric parameter takes on the grid
	// (log-spaced for loguniform; an int's are rounded and kept once). Default 3.
	GridPoints int `yaml:"grid_points"`
	// TPE: MinPoints results at a budget before a model is fitted on it (default: the number
	// of parameters plus one); RandomFraction of draws kept random (default 0.1); Candidates drawn
	// from the good density and ranked by the density ratio (default 64); StartupTrials drawn at
	// random before any model is used (default 0: random until a budget has enough results);
	// TopFraction of a budget's results that make up the good density (default 0.15);
	// BandwidthFactor widens the good density for the candidates (default 3); MinBandwidth floors
	// every bandwidth (default 0.001, on parameters scaled to [0, 1]).
	MinPoints       int      `yaml:"min_points"`
	RandomFraction  *float64 `yaml:"random_fraction"`
	Candidates      int      `yaml:"candidates"`
	StartupTrials   int      `yaml:"startup_trials"`
	TopFraction     float64  `yaml:"top_fraction"`
	BandwidthFactor float64  `yaml:"bandwidth_factor"`
	MinBandwidth    float64  `yaml:"min_bandwidth"`
	// Multivariate fits one joint density over all parameters, as BOHB does, instead of one
	// density per parameter (the default with one objective, as Optuna's TPE; with several,
	// the joint density is): see search.TPE.
	Multivariate bool `yaml:"multivariate"`
	// WarmStart names earlier runs under the root (by name or ID) whose results tpe learns from
	// before this run's own: the parameters they share with this space, the objective's values
	// at every budget they reached. Resolved when the run starts and kept in its state directory.
	WarmStart []string `yaml:"warm_start"`
}

// tpeOptions are the fields only tpe reads.
var tpeOptions = []string{"min_points", "random_fraction", "candidates", "startup_trials", "top_fraction", "bandwidth_factor", "min_bandwidth", "multivariate", "warm_start"}

// Adaptive says whether the sampler learns from results: its draws wait for the launch (the
// executor draws them then, from every result so far); the others are drawn when the run starts.
func (s Sampler) Adaptive() bool { return s.Name == SamplerTPE }

// SamplerSeed is the seed configurations are drawn from.
func (e *Experiment) SamplerSeed() int64 {
	if e.Sampler.Seed != nil {
		return *e.Sampler.Seed
	}
	return e.Seed
}

// samplerDefaults fills the sampler's defaults and a trials count written "grid".
func (e *Experiment) samplerDefaults() {
	s := &e.Sampler
	if s.Name == "" && !e.unknown("sampler.name") {
		s.Name = SamplerRandom
	}
	if s.GridPoints == 0 && !e.Has("sampler.grid_points") {
		s.GridPoints = 3
	}
	if s.MinPoints == 0 && !e.Has("sampler.min_points") {
		s.MinPoints = len(e.SearchSpace) + 1
	}
	if s.RandomFraction == nil && !e.unknown("sampler.random_fraction") {
		s.RandomFraction = new(float64)
		*s.RandomFraction = 0.1
	}
	if s.Candidates == 0 && !e.Has("sampler.candidates") {
		s.Candidates = 64
	}
	if s.TopFraction == 0 && !e.Has("sampler.top_fraction") {
		s.TopFraction = 0.15
	}
	if s.BandwidthFactor == 0 && !e.Has("sampler.bandwidth_factor") {
		s.BandwidthFactor = 3
	}
	if s.MinBandwidth == 0 && !e.Has("sampler.min_bandwidth") {
		s.MinBandwidth = 1e-3
	}
	// Several objectives: one joint density. A front trades parameters that go together (a
	// depth and the dropout that suits it); search-bench's curves-latency ends with 43% of the
	// per-parameter densities' hypervolume regret, zdt1 with 18% more (still 32% below Optuna's
	// multi-objective TPE): docs/search.md.
	if !s.Multivariate && !e.Has("sampler.multivariate") && len(e.Objectives) > 1 {
		s.Multivariate = true
	}
	if e.gridTrials != "" && s.Name == SamplerGrid && s.GridPoints >= 1 && s.GridPoints <= MaxGridPoints {
		if n, ok := GridSize(e.SearchSpace, s.GridPoints, MaxTrials); ok && e.conditionsSound() {
			e.setFirstTrials(n)
		}
	}
}

func (e *Experiment) setFirstTrials(n int) {
	switch {
	case e.Algorithm.SHA != nil:
		e.Algorithm.SHA.Trials = n
	case len(e.Algorithm.Stages) > 0:
		e.Algorithm.Stages[0].Trials = n
	}
}

// MaxGridPoints bounds sampler.grid_points.
const MaxGridPoints = 1000

// sampler checks the sampler block against the algorithm and the search space.
func (v *validator) sampler() {
	s := v.e.Sampler
	switch s.Name {
	case SamplerRandom, SamplerSobol, SamplerTPE:
	case SamplerGrid:
		v.grid()
	default:
		v.add("sampler.name", "%q is not a sampler (random, grid, sobol or tpe)", s.Name)
	}
	if v.e.gridTrials != "" && s.Name != SamplerGrid {
		v.add(v.e.gridTrials, `"grid" takes the grid's size: it needs sampler: {name: grid} (the sampler is %s)`, s.Name)
	}
	if s.Name != SamplerGrid && v.e.Has("sampler.grid_points") {
		v.add("sampler.grid_points", "applies to the grid sampler only (the sampler is %s)", s.Name)
	}
	if s.Name != SamplerTPE {
		for _, f := range tpeOptions {
			if v.e.Has("sampler." + f) {
				v.add("sampler."+f, "applies to the tpe sampler only (the sampler is %s)", s.Name)
			}
		}
		return
	}
	if s.MinPoints < 1 || s.MinPoints > MaxTrials {
		v.add("sampler.min_points", "%d is out of range (1 to %d)", s.MinPoints, MaxTrials)
	}
	if f := s.RandomFraction; f != nil && (*f < 0 || *f > 1) {
		v.add("sampler.random_fraction", "%v is not a fraction (0 to 1)", *f)
	}
	if s.Candidates < 1 || s.Candidates > 100_000 {
		v.add("sampler.candidates", "%d is out of range (1 to 100000)", s.Candidates)
	}
	if s.StartupTrials < 0 || s.StartupTrials > MaxTrials {
		v.add("sampler.startup_trials", "%d is out of range (0 to %d)", s.StartupTrials, MaxTrials)
	}
	if !(s.TopFraction > 0 && s.TopFraction < 1) {
		v.add("sampler.top_fraction", "%v is not a fraction strictly between 0 and 1", s.TopFraction)
	}
	if !(s.BandwidthFactor > 0 && s.BandwidthFactor <= 100) {
		v.add("sampler.bandwidth_factor", "%v is out of range (above 0, at most 100)", s.BandwidthFactor)
	}
	for i, run := range s.WarmStart {
		if run == "" || len(run) > 256 {
			v.add(fmt.Sprintf("sampler.warm_start[%d]", i), "%q is not a run's name or ID", run)
		}
	}
	if len(s.WarmStart) > 100 {
		v.add("sampler.warm_start", "names %d runs (at most 100)", len(s.WarmStart))
	}
	if !(s.MinBandwidth > 0 && s.MinBandwidth <= 1) {
		v.add("sampler.min_bandwidth", "%v is out of range (above 0, at most 1)", s.MinBandwidth)
	}
}

// grid checks that the grid is enumerable and that the first stage runs all of it, once.
func (v *validator) grid() {
	s, a := v.e.Sampler, v.e.Algorithm
	if s.GridPoints < 1 || s.GridPoints > MaxGridPoints {
		v.add("sampler.grid_points", "%d is out of range (1 to %d)", s.GridPoints, MaxGridPoints)
		return
	}
	if a.Hyperband != nil {
		v.add("sampler.name", "grid needs sha or stages: Hyperband's brackets each sample a different number of trials")
		return
	}
	if !v.e.conditionsSound() {
		return // the conditions' own problems say why
	}
	n, ok := GridSize(v.e.SearchSpace, s.GridPoints, MaxTrials)
	if !ok {
		v.add("sampler.grid_points", "the grid holds more than %d configurations: fewer grid_points or parameters", MaxTrials)
		return
	}
	path, trials := "algorithm.sha.trials", 0
	switch {
	case a.SHA != nil:
		trials = a.SHA.Trials
	case len(a.Stages) > 0:
		path, trials = "algorithm.stages[0].trials", a.Stages[0].Trials
	default:
		return
	}
	if trials != n && !v.e.unknown(path) {
		v.add(path, "%d trials, but the grid holds %d configurations (%s): give trials: %d, or trials: grid", trials, n, GridShape(v.e.SearchSpace, s.GridPoints), n)
	}
}

// GridShape says how a grid's size comes about: "lr 3 x optimizer 2 = 6" (unconditional), or
// the count of reachable combinations under when.
func GridShape(space map[string]Param, points int) string {
	names := sortedKeys(space)
	parts := make([]string, 0, len(names))
	conditional := false
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %d", name, len(space[name].GridValues(points))))
		conditional = conditional || len(space[name].When) > 0
	}
	if conditional {
		return "the reachable combinations of " + strings.Join(parts, " x ") + " under when"
	}
	return strings.Join(parts, " x ")
}
