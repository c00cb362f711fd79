package runstate

import (
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
)

// Report is a run's report: the best trial, and the plan's prediction beside what the run
// realized, in total and per stage. It is the JSON of a state directory's report.json and of
// `rubberband status -o json`.
type Report struct {
	Outcome
	Predicted Measured `json:"predicted"`
	// Replanned is the prediction of the plan the run followed to its end: the last re-plan's
	// forecast of the whole job; nil when the run kept its plan.
	Replanned *Measured     `json:"replanned,omitempty"`
	Stages    []StageReport `json:"stages"`
	// DeadlineMissed is a finished run that ended past its deadline (DeadlineS), by MissedByS:
	// its result stands, its promise did not.
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

// Off is how far, in percent, what a stage took and cost came out from its prediction; ok is
// false for a stage without a prediction or not finished (part of a stage is not set against
// the whole of its prediction).
func (s StageReport) Off() (time, cost float64, ok bool) {
	p, r := s.Predicted, s.Realized
	if p.Duration <= 0 || r.Duration <= 0 || r.Done+r.Failed < r.Trials {
		return 0, 0, false
	}
	return format.Pct(r.Duration, p.Duration), format.Pct(r.Cost, p.Cost), true
}

// Compare joins the plan's per-stage predictions with the run's realized stages, stage by stage
// of each bracket. The prediction of the whole run is the plan's mean JCT and mean cost. A stage
// the plan does not hold (a plan of other stages than the run's) has a zero prediction.
func Compare(plan *planner.Report, res *Result) Report {
	r := Report{Outcome: res.Outcome, Predicted: Measured{JCT: plan.Predicted.JCT.Mean, Cost: plan.Predicted.Cost.Mean}}
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
