package runstate

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/sim/meter"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Result is what a run realized: its Outcome, and its brackets' stages as they happened.
type Result struct {
	Outcome
	Stopped  string          `json:"stopped,omitempty"` // why its driver stopped short of the end
	Brackets []BracketResult `json:"brackets"`
}

// Outcome is what a run's Result and its Report share: the run, how it ended, the trial it
// chose, and what it realized.
type Outcome struct {
	Experiment string        `json:"experiment"`
	RunID      string        `json:"run_id,omitempty"`
	Finished   bool          `json:"finished"`
	Cancelled  string        `json:"cancelled,omitempty"`
	Best       *BestTrial    `json:"best"`
	Realized   Measured      `json:"realized"`
	Trials     []TrialResult `json:"trials"`
	// Interruptions are the spot nodes taken away during the run, in order.
	Interruptions []Interruption `json:"interruptions,omitempty"`
	// Revisions are the re-plans made during the run, in order.
	Revisions []Revision `json:"revisions,omitempty"`
	// Forecast is the latest forecast of the whole run, from the last stage that started after
	// a sync (nil before the first such stage, or when neither re-planning nor a budget asked).
	Forecast *planner.Forecast `json:"forecast,omitempty"`
	// Phases are an ASHA run's phases of its GPU schedule as they happened; its cost is split
	// among them (its brackets' stages are rungs, which overlap: each costs 0 there).
	Phases []PhaseResult `json:"phases,omitempty"`
	// DeadlineS is the run's deadline as its spec says now (spec seconds from the start; 0: none).
	DeadlineS float64 `json:"deadline_s,omitempty"`
	// Pareto is a multi-objective run's Pareto front (State.Pareto): Best is one of them, the
	// first by promotion's order.
	Pareto []ParetoTrial `json:"pareto,omitempty"`
}

// ParetoTrial is a configuration on a multi-objective run's Pareto front, with its result at the
// highest iteration results reached: the spec's objectives and constrained metrics.
type ParetoTrial struct {
	Trial   string             `json:"trial"`
	Params  spec.Config        `json:"params"`
	Iter    int                `json:"iter"`
	Metrics map[string]float64 `json:"metrics"`
}

// PhaseResult is one phase of an ASHA run's GPU schedule: its GPUs, when it began and how long
// it lasted (spec seconds), and what it cost.
type PhaseResult struct {
	GPUs     int     `json:"gpus"`
	Nodes    int     `json:"nodes"`
	Start    float64 `json:"start_s"`
	Duration float64 `json:"duration_s"`
	Cost     float64 `json:"cost_usd"`
}

// Revision is a re-plan of a bracket's stages from Stage on, made At (spec seconds from the
// start): why, the GPUs of those stages before and after, and the forecasts of the whole run.
type Revision struct {
	Bracket          string           `json:"bracket"`
	Stage            int              `json:"stage"`
	At               float64          `json:"at_s"`
	Reason           string           `json:"reason"`
	GPUsBefore       []int            `json:"gpus_before"`
	Plan             []sim.StageAlloc `json:"plan"`
	Before           planner.Forecast `json:"before"`
	After            planner.Forecast `json:"after"`
	DeadlineGivesWay bool             `json:"deadline_gives_way,omitempty"`
	// Phase marks a revision of an ASHA run's schedule: Stage is the phase it was in, Plan the
	// schedule's phases from there on.
	Phase bool `json:"phase,omitempty"`
}

// Where says what a revision revised from: "BRACKET from stage N", or "asha from phase N".
func (r Revision) Where() string {
	if r.Phase {
		return fmt.Sprintf("asha from phase %d", r.Stage+1)
	}
	return fmt.Sprintf("%s from stage %d", r.Bracket, r.Stage+1)
}

// NewPlan is the revised plan as said: stages' GPUs and nodes, or an ASHA schedule's GPUs by
// phase (12>6>2).
func (r Revision) NewPlan() string {
	if r.Phase {
		gpus := make([]int, len(r.Plan))
		for i, sa := range r.Plan {
			gpus[i] = sa.GPUs
		}
		return sim.ASHAPlan{GPUs: gpus}.String()
	}
	return sim.FormatStages(r.Plan)
}

// Interruption is spot nodes of a bracket taken away at one time (spec seconds from the start).
type Interruption struct {
	Bracket string   `json:"bracket"`
	Nodes   []string `json:"nodes"`
	At      float64  `json:"at_s"`
	Why     string   `json:"why,omitempty"`
}

// Measured is a completion time (spec seconds) and a cost (dollars).
type Measured struct {
	JCT  float64 `json:"jct_s"`
	Cost float64 `json:"cost_usd"`
}

// BestTrial is the configuration the job chose.
type BestTrial struct {
	Trial  string      `json:"trial"`
	Params spec.Config `json:"params"`
	Metric float64     `json:"metric"`
}

// BracketResult is one bracket's stages as they happened.
type BracketResult struct {
	Name   string        `json:"name"`
	Stages []StageResult `json:"stages"`
}

// StageResult is one stage as it happened. Start and Duration are spec seconds from the run's
// start; Cost is the stage's share of the total by the cost meter's rule (sim/meter), the
// simulator's rule, so that the stages add up to the total.
type StageResult struct {
	Trials   int `json:"trials"`
	Iters    int `json:"iters"`
	GPUs     int `json:"gpus"`
	Nodes    int `json:"nodes"`
	Done     int `json:"done"`
	Failed   int `json:"failed"`
	Retries  int `json:"retries,omitempty"`
	Timeouts int `json:"timeouts,omitempty"`
	// Interrupted is how many tries lost a node (relaunched from their checkpoints, not retries).
	Interrupted int      `json:"interrupted,omitempty"`
	Promoted    []string `json:"promoted,omitempty"`
	Start       float64  `json:"start_s"`
	Duration    float64  `json:"duration_s"`
	Cost        float64  `json:"cost_usd"`
}

// TrialResult is one trial's outcome.
type TrialResult struct {
	ID      string             `json:"id"`
	Bracket int                `json:"bracket"`
	Params  spec.Config        `json:"params"`
	Stages  int                `json:"stages_done"`
	Iter    int                `json:"iter"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	State   trial.State        `json:"state"`
	Failed  bool               `json:"failed,omitempty"`
	Nodes   []string           `json:"nodes,omitempty"` // where its last launch ran
}

// Bill meters the run until now with the one cost meter the simulator's per-stage breakdown
// uses too (sim/meter: its doc says how cost is split into stages), on spans in spec seconds from
// the run's start.
func (s *State) Bill(now time.Time) meter.Breakdown {
	m := s.Model
	if s.Start.IsZero() {
		return meter.Breakdown{}
	}
	sec, price := s.sec, s.nodePrice
	var nodes []meter.NodeSpan
	for _, r := range s.released {
		nodes = append(nodes, meter.NodeSpan{Bracket: r.bracket, RunningFrom: sec(r.node.RunningAt), ReleasedAt: sec(r.released), PricePerSecond: price(r.node)})
	}
	for b := range s.Nodes {
		for _, n := range append(append([]cloud.Node(nil), s.Nodes[b]...), s.Draining[b]...) {
			nodes = append(nodes, meter.NodeSpan{Bracket: b, RunningFrom: sec(n.RunningAt), ReleasedAt: max(sec(now), sec(n.RunningAt)), PricePerSecond: price(n)})
		}
	}
	var launches []meter.LaunchSpan
	for _, l := range s.launches {
		b := l.bracket
		if s.ASHA != nil {
			b = 0 // its one cluster's
		}
		launches = append(launches, meter.LaunchSpan{Bracket: b, Start: sec(l.start), End: sec(l.end), GPUs: l.gpus, PricePerGPUSecond: m.GPUPricePerSecond()})
	}
	var windows []meter.StageWindow
	if s.ASHA != nil { // its phases are what it bills by: bracket 0's stages
		at := s.ASHA.PhaseAt
		for j := range at {
			end := s.phaseEnd(j, now)
			windows = append(windows, meter.StageWindow{Bracket: 0, Stage: j, Start: sec(at[j]), Sync: max(sec(end), sec(at[j]))})
		}
	}
	for b, br := range s.Brackets {
		if s.ASHA != nil {
			break
		}
		for k := range br.Stages {
			w, ok := s.StageAt[StageKey{b, k}]
			if !ok || w.Start.IsZero() {
				continue
			}
			end := w.end
			if end.IsZero() {
				end = now
			}
			windows = append(windows, meter.StageWindow{Bracket: b, Stage: k, Start: sec(w.Start), Sync: max(sec(end), sec(w.Start))})
		}
	}
	bill, err := meter.Bill(m.Rules, nodes, launches, windows)
	if err != nil {
		// Spans the meter cannot place (a node of a bracket with no stage started) would be a
		// driver bug; bill them whole rather than lose them.
		fmt.Fprintf(s.log, "cost meter: %v\n", err)
		bill = meter.Breakdown{Stages: map[meter.StageKey]float64{}}
		for _, n := range nodes {
			bill.Total += m.DataCost + m.Bill(n.ReleasedAt-n.RunningFrom, n.PricePerSecond)
		}
	}
	return bill
}

// Result describes the run as of now.
func (s *State) Result(now time.Time) *Result {
	bill := s.Bill(now)
	total := bill.Total
	res := &Result{Outcome: Outcome{Experiment: s.exp.Name, RunID: s.RunID, Finished: true, Cancelled: s.Cancelled,
		DeadlineS: s.exp.Deadline.D().Seconds()}, Stopped: s.stopped}
	end := s.Start
	var tops []TrialStage // a multi-objective run's brackets' tops, ranked together below
	for b, br := range s.Brackets {
		bres := BracketResult{Name: br.Name}
		for k, st := range br.Stages {
			key := StageKey{b, k}
			at := s.StageAt[key]
			keep, synced := s.Synced[key]
			if a := s.ASHA; a != nil { // a rung: its GPUs are the phases'
				keep, synced = a.promoted[key], s.Finished
				if end := a.rungEnd[key]; !end.IsZero() {
					at.end = end
				}
			}
			if !synced {
				res.Finished = false
			}
			sr := StageResult{Trials: st.Trials, Iters: st.Iters, GPUs: s.Plan[b][k].GPUs, Nodes: s.Plan[b][k].Nodes, Promoted: keep,
				Retries: s.retries[key], Timeouts: s.timeouts[key], Interrupted: s.lostTries[key]}
			if s.ASHA != nil {
				sr.GPUs, sr.Nodes = 0, 0
			}
			for _, id := range s.Order[b] {
				t := s.Trials[id]
				if _, ok := t.Done[k]; ok {
					sr.Done++
				}
				if t.Failed[k] {
					sr.Failed++
				}
			}
			if !at.Start.IsZero() {
				stop := at.end
				if stop.IsZero() {
					stop = now
				}
				sr.Start = at.Start.Sub(s.Start).Seconds() / s.timeScale
				sr.Duration = stop.Sub(at.Start).Seconds() / s.timeScale
				if s.ASHA == nil { // an ASHA run's cost is its phases'
					sr.Cost = bill.Stages[meter.StageKey{Bracket: b, Stage: k}]
				}
				if stop.After(end) {
					end = stop
				}
			}
			bres.Stages = append(bres.Stages, sr)
		}
		res.Brackets = append(res.Brackets, bres)
		// The bracket's best: the top of its last stage.
		last := len(br.Stages) - 1
		if keep := s.Synced[StageKey{b, last}]; len(keep) > 0 && s.ASHA == nil {
			t := s.Trials[keep[0]]
			m := t.Done[last]
			if s.exp.MultiObjective() {
				tops = append(tops, TrialStage{Trial: t.id, Stage: last})
			} else if !math.IsNaN(m) && (res.Best == nil || s.better(m, res.Best.Metric)) {
				res.Best = &BestTrial{Trial: t.id, Params: t.Params, Metric: m}
			}
		}
	}
	if len(tops) > 0 {
		first := s.orderPoints(tops)[0] // brackets end at stages of their own (Hyperband)
		t := s.Trials[first.Trial]
		res.Best = &BestTrial{Trial: t.id, Params: t.Params, Metric: t.Done[first.Stage]}
	}
	if s.exp.MultiObjective() {
		res.Pareto = s.Pareto()
	}
	for b := range s.Brackets {
		for _, id := range s.Order[b] {
			t := s.Trials[id]
			failed := false
			for range t.Failed {
				failed = true
			}
			res.Trials = append(res.Trials, TrialResult{ID: id, Bracket: b, Params: t.Params, Stages: len(t.Done), Iter: t.Iter, Metrics: t.metrics, State: t.State, Failed: failed, Nodes: t.Nodes})
		}
	}
	sort.Slice(res.Trials, func(i, j int) bool { return res.Trials[i].ID < res.Trials[j].ID })
	for _, in := range s.interrupted {
		res.Interruptions = append(res.Interruptions, Interruption{Bracket: s.Brackets[in.bracket].Name, Nodes: in.nodes,
			At: in.at.Sub(s.Start).Seconds() / s.timeScale, Why: in.why})
	}
	for _, r := range s.revisions {
		e := r.event
		res.Revisions = append(res.Revisions, Revision{Bracket: s.Brackets[r.bracket].Name, Stage: r.stage, At: r.at.Sub(s.Start).Seconds() / s.timeScale,
			Reason: e.Reason, GPUsBefore: r.gpusBefore, Plan: e.Plan, Before: deref(e.Before), After: deref(e.After), DeadlineGivesWay: e.GivesWay, Phase: s.ASHA != nil})
	}
	if s.Forecast != nil {
		f := *s.Forecast
		res.Forecast = &f
	}
	if a := s.ASHA; a != nil {
		res.Best = s.ashaBest()
		if s.Finished {
			end = a.end
		}
		for j, at := range a.PhaseAt {
			stop := s.phaseEnd(j, now)
			g := a.Plan.GPUs[j]
			res.Phases = append(res.Phases, PhaseResult{GPUs: g, Nodes: s.Model.NodesFor(g), Start: at.Sub(s.Start).Seconds() / s.timeScale,
				Duration: max(0, stop.Sub(at).Seconds()/s.timeScale), Cost: bill.Stages[meter.StageKey{Bracket: 0, Stage: j}]})
		}
	}
	if !res.Finished {
		end = now
	}
	res.Realized = Measured{JCT: end.Sub(s.Start).Seconds() / s.timeScale, Cost: total}
	return res
}

// phaseEnd is when an ASHA run's phase j ended: the next one's start, the run's end, or now for
// the phase under way.
func (s *State) phaseEnd(j int, now time.Time) time.Time {
	a := s.ASHA
	switch {
	case j+1 < len(a.PhaseAt):
		return a.PhaseAt[j+1]
	case s.Finished:
		return a.end
	}
	return now
}

// ashaBest is an ASHA run's winner: the best result at the highest rung any trial reached (the
// ladder's rule), nil before any result.
func (s *State) ashaBest() *BestTrial {
	i, _, ok := s.ASHA.Ladder.Best()
	if !ok {
		return nil
	}
	t := s.Trials[s.ASHA.ByIndex[i]]
	top := -1
	for k := range t.Done {
		top = max(top, k)
	}
	return &BestTrial{Trial: t.id, Params: t.Params, Metric: t.Done[top]}
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}
