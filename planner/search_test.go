package planner

import (
	"testing"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The first stage's waves are tpe's batches; a batch is guided once the bracket's earlier waves,
// or the rounds before, hold the results a model needs at one budget.
func TestSearchPlanCountsGuidedBatches(t *testing.T) {
	exp := &spec.Experiment{Sampler: spec.Sampler{Name: spec.SamplerTPE, MinPoints: 3},
		Algorithm: spec.Algorithm{SHA: &spec.SHA{Trials: 81, MinIters: 1, MaxIters: 27, Eta: 3}}}
	res := sim.Result{Brackets: []sim.BracketResult{{Stages: []sim.StageResult{{Trials: 81, GPUs: 4, GPUsPerTrial: 1, Waves: 21}}}}}
	sp := searchPlan(exp, res)
	// 4 slots: waves 0 and 1 see 0 and 4 results; from wave 2 on, 8 >= 6.
	if sp.Trials != 81 || sp.Batches != 21 || sp.Guided != 19 || sp.Needed != 6 {
		t.Fatalf("%+v", sp)
	}
	// Two rounds of Hyperband(1, 9, 3), one wave per first stage: the first round's three
	// batches see nothing, the second round's see all of the first's 17 trials' results.
	exp.Algorithm = spec.Algorithm{Hyperband: &spec.Hyperband{MinIters: 1, MaxIters: 9, Eta: 3, Rounds: 2}}
	res.Brackets = nil
	for _, b := range exp.Algorithm.Brackets() {
		res.Brackets = append(res.Brackets, sim.BracketResult{Stages: []sim.StageResult{{Trials: b.Trials(), GPUs: b.Trials(), GPUsPerTrial: 1, Waves: 1}}})
	}
	if sp := searchPlan(exp, res); sp.Batches != 6 || sp.Guided != 3 || sp.Trials != 34 {
		t.Fatalf("%+v", sp)
	}
	exp.Sampler.Name = spec.SamplerRandom
	if searchPlan(exp, res) != nil {
		t.Fatal("random sampling has no model to guide")
	}
}
