package runstate_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Compare puts each realized stage beside the prediction of the same bracket and stage, in
// bracket then stage order, and the plan's means beside the realized totals.
func TestCompareJoinsStageByStage(t *testing.T) {
	plan := &planner.Report{
		Predicted: planner.Prediction{JCT: sim.Summary{Mean: 600, P50: 590}, Cost: sim.Summary{Mean: 12, P50: 11}},
		Brackets: []planner.BracketReport{
			{Name: "b0", Stages: []sim.StageResult{{Trials: 9, Duration: 100, Cost: 1}, {Trials: 3, Duration: 200, Cost: 2}}},
			{Name: "b1", Stages: []sim.StageResult{{Trials: 4, Duration: 300, Cost: 3}}},
		},
	}
	best := &runstate.BestTrial{Trial: "t7", Metric: 0.9}
	res := &runstate.Result{Outcome: runstate.Outcome{Experiment: "x", RunID: "r1", Finished: true, Best: best, Realized: runstate.Measured{JCT: 630, Cost: 13},
		Trials: []runstate.TrialResult{{ID: "t7"}}},
		Brackets: []runstate.BracketResult{
			{Name: "b0", Stages: []runstate.StageResult{{Trials: 9, Duration: 110, Cost: 1.5}, {Trials: 3, Duration: 190, Cost: 2.5}}},
			{Name: "b1", Stages: []runstate.StageResult{{Trials: 4, Duration: 310, Cost: 3.5}}},
		}}
	rep := runstate.Compare(plan, res)
	if rep.Experiment != "x" || rep.RunID != "r1" || !rep.Finished || rep.Best != best || len(rep.Trials) != 1 {
		t.Fatalf("header %+v", rep)
	}
	if rep.Predicted != (runstate.Measured{JCT: 600, Cost: 12}) || rep.Realized != (runstate.Measured{JCT: 630, Cost: 13}) {
		t.Fatalf("predicted %+v, realized %+v", rep.Predicted, rep.Realized)
	}
	type row struct {
		bracket          string
		stage            int
		predDur, realDur float64
	}
	var got []row
	for _, s := range rep.Stages {
		got = append(got, row{s.Bracket, s.Stage, s.Predicted.Duration, s.Realized.Duration})
	}
	want := []row{{"b0", 0, 100, 110}, {"b0", 1, 200, 190}, {"b1", 0, 300, 310}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stages %+v, want %+v", got, want)
	}
	if rep.Replanned != nil {
		t.Fatalf("a run that kept its plan has a re-planned prediction %+v", rep.Replanned)
	}
	// A run that re-planned is held to its last revision's forecast of the whole job.
	res.Revisions = []runstate.Revision{
		{Bracket: "b0", Stage: 1, After: planner.Forecast{JCT: 640, Cost: 14}},
		{Bracket: "b1", Stage: 0, After: planner.Forecast{JCT: 620, Cost: 13.2}},
	}
	if rep := runstate.Compare(plan, res); rep.Replanned == nil || *rep.Replanned != (runstate.Measured{JCT: 620, Cost: 13.2}) || rep.Predicted.Cost != 12 {
		t.Fatalf("re-planned %+v, predicted %+v", rep.Replanned, rep.Predicted)
	}
	res.Revisions = nil
	// A plan short of the run's stages predicts nothing for them rather than failing.
	plan.Brackets = plan.Brackets[:1]
	if rep := runstate.Compare(plan, res); len(rep.Stages) != 3 || rep.Stages[2].Predicted != (sim.StageResult{}) || rep.Stages[2].Realized.Duration != 310 {
		t.Fatalf("short plan: %+v", rep.Stages)
	}
}

// report.json's keys are a contract (tests and users decode it): they stay what they are. A
// stage without a prediction of its own (an ASHA run's rung) leaves "predicted" out rather than
// claim zeros.
func TestReportJSONKeys(t *testing.T) {
	b, err := json.Marshal(runstate.Report{Stages: []runstate.StageReport{{Predicted: sim.StageResult{Trials: 8}}, {}}})
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(top), []string{"best", "experiment", "finished", "predicted", "realized", "stages", "trials"}; !slices.Equal(got, want) {
		t.Fatalf("report keys %v, want %v", got, want)
	}
	var stages []map[string]json.RawMessage
	if err := json.Unmarshal(top["stages"], &stages); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(stages[0]), []string{"bracket", "predicted", "realized", "stage"}; !slices.Equal(got, want) {
		t.Fatalf("stage keys %v, want %v", got, want)
	}
	if got, want := keys(stages[1]), []string{"bracket", "realized", "stage"}; !slices.Equal(got, want) {
		t.Fatalf("a rung's keys %v, want %v", got, want)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(top["predicted"], &m); err != nil || !slices.Equal(keys(m), []string{"cost_usd", "jct_s"}) {
		t.Fatalf("predicted keys %v (%v)", keys(m), err)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
