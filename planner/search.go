package planner

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// SearchPlan says how a plan batches an adaptive sampler's draws: a trial is drawn when its
// first launch is placed, so the waves of the brackets' first stages are the search's batches,
// and a batch is guided by the model once some budget has the results it needs.
type SearchPlan struct {
	Sampler string `json:"sampler"`
	Trials  int    `json:"trials"`
	Batches int    `json:"batches"`
	// Guided counts the batches drawn with a model: after earlier rounds' results, or after
	// earlier waves of the bracket's own first stage (other brackets' results, which may come
	// sooner, are not counted: a lower bound).
	Guided int `json:"guided"`
	// Needed is how many results at one budget the model needs (twice min_points).
	Needed int `json:"needed"`
}

// searchPlan is the plan's batches of exp's adaptive sampler (nil for the others).
func searchPlan(exp *spec.Experiment, res sim.Result) *SearchPlan {
	if !exp.Sampler.Adaptive() {
		return nil
	}
	brackets := exp.Algorithm.Brackets()
	sp := &SearchPlan{Sampler: exp.Sampler.Name, Needed: 2 * max(exp.Sampler.MinPoints, 1)}
	before := map[int]int{} // results per budget of the rounds before
	round, ready := 0, false
	for b, br := range brackets {
		if b >= len(res.Brackets) || len(res.Brackets[b].Stages) == 0 {
			continue
		}
		if br.Round != round {
			// The rounds before this one have ended: their results are all in.
			for r := b - 1; r >= 0 && brackets[r].Round == round; r-- {
				for _, st := range brackets[r].Stages {
					before[st.EndIter()] += st.Trials
				}
			}
			for _, n := range before {
				ready = ready || n >= sp.Needed
			}
			round = br.Round
		}
		first := res.Brackets[b].Stages[0]
		slots := max(first.GPUs/max(first.GPUsPerTrial, 1), 1)
		sp.Trials += first.Trials
		sp.Batches += first.Waves
		for w := range first.Waves {
			if ready || before[br.Stages[0].EndIter()]+w*slots >= sp.Needed {
				sp.Guided++
			}
		}
	}
	return sp
}

// String says it in a line.
func (sp *SearchPlan) String() string {
	return fmt.Sprintf("%s draws %d trials in %d batches (the waves of the brackets' first stages), %d guided by its model (which needs %d results at one budget)",
		sp.Sampler, sp.Trials, sp.Batches, sp.Guided, sp.Needed)
}
