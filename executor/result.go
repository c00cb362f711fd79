package executor

import (
	"math"
	"sort"
	"time"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// Result is what a run realized.
type Result struct {
	Experiment string          `json:"experiment"`
	RunID      string          `json:"run_id,omitempty"`
	Finished   bool            `json:"finished"`
	Cancelled  string          `json:"cancelled,omitempty"`
	Best       *BestTrial      `json:"best"`
	Realized   Measured        `json:"realized"`
	Brackets   []BracketResult `json:"brackets"`
	Trials     []TrialResult   `json:"trials"`
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
// start; Cost leaves out billing rounding, which only the total includes.
type StageResult struct {
	Trials   int      `json:"trials"`
	Iters    int      `json:"iters"`
	GPUs     int      `json:"gpus"`
	Nodes    int      `json:"nodes"`
	Done     int      `json:"done"`
	Failed   int      `json:"failed"`
	Retries  int      `json:"retries,omitempty"`
	Timeouts int      `json:"timeouts,omitempty"`
	Promoted []string `json:"promoted,omitempty"`
	Start    float64  `json:"start_s"`
	Duration float64  `json:"duration_s"`
	Cost     float64  `json:"cost_usd"`
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
}

type costs struct {
	total float64
}

// cost meters what the run's nodes cost until now, with the simulator's billing rules.
func (x *run) cost(now time.Time) costs {
	x.mu.Lock()
	defer x.mu.Unlock()
	m, s := x.model, x.st
	var c costs
	spans := append([]nodeSpan(nil), s.released...)
	for b, nodes := range s.nodes {
		for _, n := range nodes {
			spans = append(spans, nodeSpan{bracket: b, node: n, released: now})
		}
	}
	c.total = float64(len(spans)) * m.DataCost
	if m.PerFunction {
		for _, l := range s.launches {
			c.total += float64(l.gpus) * m.Bill(l.end.Sub(l.start).Seconds()/x.cfg.TimeScale, m.GPUPricePerSecond())
		}
		return c
	}
	for _, s := range spans {
		c.total += m.Bill(s.released.Sub(s.node.RunningAt).Seconds()/x.cfg.TimeScale, m.NodePricePerSecond)
	}
	return c
}

// stageCost is what bracket b's nodes (or launches) cost within a time window, unrounded.
func (x *run) stageCost(b int, from, to time.Time, now time.Time) float64 {
	m, st := x.model, x.st
	overlap := func(s, e time.Time) float64 {
		if s.Before(from) {
			s = from
		}
		if e.After(to) {
			e = to
		}
		if !e.After(s) {
			return 0
		}
		return e.Sub(s).Seconds() / x.cfg.TimeScale
	}
	total := 0.0
	if m.PerFunction {
		for _, l := range st.launches {
			if l.bracket == b {
				total += float64(l.gpus) * overlap(l.start, l.end) * m.GPUPricePerSecond()
			}
		}
		return total
	}
	spans := append([]nodeSpan(nil), st.released...)
	for _, n := range st.nodes[b] {
		spans = append(spans, nodeSpan{bracket: b, node: n, released: now})
	}
	for _, s := range spans {
		if s.bracket == b {
			total += overlap(s.node.RunningAt, s.released) * m.NodePricePerSecond
		}
	}
	return total
}

// result describes the run so far.
func (x *run) result() *Result {
	now := x.cfg.Now()
	total := x.cost(now).total
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.st
	res := &Result{Experiment: x.cfg.Experiment.Name, RunID: s.runID, Finished: true, Cancelled: s.cancelled}
	end := s.start
	for b, br := range s.brackets {
		bres := BracketResult{Name: br.Name}
		for k, st := range br.Stages {
			key := stageKey{b, k}
			at := s.stageAt[key]
			keep, synced := s.synced[key]
			if !synced {
				res.Finished = false
			}
			sr := StageResult{Trials: st.Trials, Iters: st.Iters, GPUs: x.cfg.Alloc[b][k].GPUs, Nodes: x.cfg.Alloc[b][k].Nodes, Promoted: keep,
				Retries: s.retries[key], Timeouts: s.timeouts[key]}
			for _, id := range s.order[b] {
				t := s.trials[id]
				if _, ok := t.done[k]; ok {
					sr.Done++
				}
				if t.failed[k] {
					sr.Failed++
				}
			}
			if !at.start.IsZero() {
				stop := at.end
				if stop.IsZero() {
					stop = now
				}
				sr.Start = at.start.Sub(s.start).Seconds() / x.cfg.TimeScale
				sr.Duration = stop.Sub(at.start).Seconds() / x.cfg.TimeScale
				sr.Cost = x.stageCost(b, at.start, stop, now)
				if stop.After(end) {
					end = stop
				}
			}
			bres.Stages = append(bres.Stages, sr)
		}
		res.Brackets = append(res.Brackets, bres)
		// The bracket's best: the top of its last stage.
		last := len(br.Stages) - 1
		if keep := s.synced[stageKey{b, last}]; len(keep) > 0 {
			t := s.trials[keep[0]]
			m := t.done[last]
			if !math.IsNaN(m) && (res.Best == nil || s.better(m, res.Best.Metric)) {
				res.Best = &BestTrial{Trial: t.id, Params: t.params, Metric: m}
			}
		}
	}
	for b := range s.brackets {
		for _, id := range s.order[b] {
			t := s.trials[id]
			failed := false
			for range t.failed {
				failed = true
			}
			res.Trials = append(res.Trials, TrialResult{ID: id, Bracket: b, Params: t.params, Stages: len(t.done), Iter: t.iter, Metrics: t.metrics, State: t.state, Failed: failed})
		}
	}
	sort.Slice(res.Trials, func(i, j int) bool { return res.Trials[i].ID < res.Trials[j].ID })
	if !res.Finished {
		end = now
	}
	res.Realized = Measured{JCT: end.Sub(s.start).Seconds() / x.cfg.TimeScale, Cost: total}
	return res
}
