package spec

import "fmt"

// ASHA is asynchronous successive halving (Li et al., MLSys 2020): trials start at rung 0 as
// GPUs free up, and one that finishes rung k goes on to rung k+1 as soon as it is among the top
// 1/eta of the results rung k holds so far; no GPU waits at a barrier. Brackets > 1 runs that many
// brackets of different early-stopping rates side by side, as the ASHA paper's: bracket s starts
// its trials at min_iters·eta^s iterations; trial i (from 0) belongs to bracket i mod brackets.
type ASHA struct {
	Trials   int `yaml:"trials"`
	MinIters int `yaml:"min_iters"`
	MaxIters int `yaml:"max_iters"`
	Eta      int `yaml:"eta"`
	// Brackets is at least 1 (the default) and at most the rungs there are (floor(log_eta(R/r))+1).
	Brackets int `yaml:"brackets"`
}

// MaxBrackets is how many brackets of different early-stopping rates the budget allows:
// floor(log_eta(max_iters/min_iters)) + 1.
func (a ASHA) MaxBrackets() int {
	n := 1
	for mulSat(a.MinIters, powSat(a.Eta, n)) <= a.MaxIters {
		n++
	}
	return n
}

// Rungs are bracket s's rungs as the iteration each trains a trial up to: min_iters·eta^(s+k),
// the last max_iters.
func (a ASHA) Rungs(bracket int) []int {
	var rungs []int
	for k := bracket; ; k++ {
		it := mulSat(a.MinIters, powSat(a.Eta, k))
		if it >= a.MaxIters {
			return append(rungs, a.MaxIters)
		}
		rungs = append(rungs, it)
	}
}

// BracketTrials is how many of the trials bracket s starts: trial i goes to bracket i mod B.
func (a ASHA) BracketTrials(bracket int) int {
	b := max(a.Brackets, 1)
	return a.Trials/b + btoi(bracket < a.Trials%b)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Synchronous is the synchronous SHA of the same trials and rungs, a bracket per ASHA bracket:
// what ASHA promotes at the least (floor(n_k/eta) of each rung's n_k results), each rung a stage
// with a barrier, the last stage with trials training them up to max_iters. The planner prices it beside the ASHA plan; the stage executor never runs an
// ASHA job as it (Algorithm.IsASHA).
func (a ASHA) Synchronous() []Bracket {
	var out []Bracket
	for s := range max(a.Brackets, 1) {
		n := a.BracketTrials(s)
		if n == 0 {
			continue
		}
		rungs := a.Rungs(s)
		var stages []Stage
		prev := 0
		for k, it := range rungs {
			if k > 0 {
				n /= a.Eta
			}
			if n == 0 {
				break
			}
			stages = append(stages, Stage{Trials: n, Iters: it - prev, StartIter: prev})
			prev = it
		}
		// As SHA's (and the ladder's finish): the last stage with trials trains them up to R.
		last := &stages[len(stages)-1]
		last.Iters = a.MaxIters - last.StartIter
		out = append(out, Bracket{Name: fmt.Sprintf("asha-s%d", s), Stages: stages})
	}
	return out
}

// IsASHA says whether the algorithm is ASHA, whose trials are promoted without barriers: not
// stages a stage executor may run.
func (a Algorithm) IsASHA() bool { return a.ASHA != nil }

func (v *validator) asha(a *ASHA) {
	v.positive("algorithm.asha.trials", a.Trials, MaxTrials)
	if !v.budget("algorithm.asha", a.MinIters, a.MaxIters, a.Eta) {
		return
	}
	if most := a.MaxBrackets(); a.Brackets < 1 || a.Brackets > most {
		v.add("algorithm.asha.brackets", "%d is out of range (1 to %d: the rungs from min_iters %d to max_iters %d at eta %d)",
			a.Brackets, most, a.MinIters, a.MaxIters, a.Eta)
	}
}

// RungStages is what an ASHA run is made of, as brackets of stages: a bracket per ASHA bracket
// (empty ones too: trial i stays in bracket i mod B), a stage per rung, from the rung below's
// iteration to its own. A stage's Trials is what the rung holds at the least, as Synchronous
// counts it (at least 1: the finish rule takes the best on to max_iters).
func (a ASHA) RungStages() []Bracket {
	var out []Bracket
	for s := range max(a.Brackets, 1) {
		n := a.BracketTrials(s)
		var stages []Stage
		prev := 0
		for k, it := range a.Rungs(s) {
			if k > 0 {
				n = max(n/a.Eta, min(n, 1))
			}
			stages = append(stages, Stage{Trials: n, Iters: it - prev, StartIter: prev})
			prev = it
		}
		out = append(out, Bracket{Name: fmt.Sprintf("asha-s%d", s), Stages: stages})
	}
	return out
}
