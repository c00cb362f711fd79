package runstate

import (
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Report is a run's report: the best trial, and the plan's prediction beside what the run
// realized, in total and per stage. It is the JSON of a state directory's report.json and of
// `rubberband status -o json`.
type Report struct {
	Experiment string     `json:"experiment"`
	RunID      string     `json:"run_id,omitempty"`
	Finished   bool       `json:"finished"`
	Cancelled  string     `json:"cancelled,omitempty"`
	Best       *BestTrial `json:"best"`
	Predicted  Measured   `json:"predicted"`
	// Replanned is the prediction of the plan the run followed to its end: the last re-plan's
	// forecast of the whole job; nil when the run kept its plan.
	Replanned *Measured     `json:"replanned,omitempty"`
	Realized  Measured      `json:"realized"`
	Stages    []StageReport `json:"stages"`
	Trials    []TrialResult `json:"trials"`
	// Interruptions are the spot nodes taken away during the run.
	Interruptions []Interruption `json:"interruptions,omitempty"`
	// Revisions are the re-plans made during the run; Forecast the latest forecast.
	Revisions []Revision        `json:"revisions,omitempty"`
	Forecast  *planner.Forecast `json:"forecast,omitempty"`
	// Phases are an ASHA run's phases of its GPU schedule (Result.Phases).
	Phases []PhaseResult `json:"phases,omitempty"`
	// DeadlineS is the run's deadline (Result.DeadlineS). DeadlineMissed is
	// a finished run that ended past it, by MissedByS: its result stands, its promise did not.
	DeadlineS      float64 `json:"deadline_s,omitempty"`
	DeadlineMissed bool    `json:"deadline_missed,omitempty"`
	MissedByS      float64 `json:"missed_by_s,omitempty"`
}

// MissedDeadline is how far past its deadline (spec seconds) a finished run ended, and whether
// it did: a run in time, without a deadline, or not finished (its forecast says where it goes)
// did not.
func MissedDeadline(res *Result) (by float64, missed bool) {
	if res == nil || !res.Finished || res.DeadlineS <= 0 || res.Realized.JCT <= res.DeadlineS {
		return 0, false
	}
	return res.Realized.JCT - res.DeadlineS, true
}

// StageReport puts one stage's prediction beside what happened. An ASHA run's rungs have no
// prediction of their own (its plan is a GPU schedule: Phases), so theirs is left out, not zero.
type StageReport struct {
	Bracket   string          `json:"bracket"`
	Stage     int             `json:"stage"`
	Predicted sim.StageResult `json:"predicted,omitzero"`
	Realized  StageResult     `json:"realized"`
}

// Compare joins the plan's per-stage predictions with the run's realized stages, stage by stage
// of each bracket. The prediction of the whole run is the plan's mean JCT and mean cost. A stage
// the plan does not hold (a plan of other stages than the run's) has a zero prediction.
func Compare(plan *planner.Report, res *Result) Report {
	r := Report{Experiment: res.Experiment, RunID: res.RunID, Finished: res.Finished, Cancelled: res.Cancelled, Best: res.Best,
		Realized: res.Realized, Trials: res.Trials, Interruptions: res.Interruptions, Revisions: res.Revisions, Forecast: res.Forecast, Phases: res.Phases,
		Predicted: Measured{JCT: plan.Predicted.JCT.Mean, Cost: plan.Predicted.Cost.Mean}, DeadlineS: res.DeadlineS}
	r.MissedByS, r.DeadlineMissed = MissedDeadline(res)
	if n := len(res.Revisions); n > 0 {
		last := res.Revisions[n-1].After
		r.Replanned = &Measured{JCT: last.JCT, Cost: last.Cost}
	}
	for b, br := range res.Brackets {
		for k, real := range br.Stages {
			sr := StageReport{Bracket: br.Name, Stage: k, Realized: real}
			if b < len(plan.Brackets) && k < len(plan.Brackets[b].Stages) {
				sr.Predicted = plan.Brackets[b].Stages[k]
			}
			r.Stages = append(r.Stages, sr)
		}
	}
	return r
}
