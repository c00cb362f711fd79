// Package journaltest synthesizes journals of large runs directly with the journal package, for
// the benchmarks of what reads a run (replay, status, the dashboard, the server): a
// 100,000-trial run cannot be run whole in a benchmark's setup, but its journal can be written.
package journaltest

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// SHAShape is the run SHA writes: one Successive Halving bracket on a plan's stages.
type SHAShape struct {
	Bracket     spec.Bracket
	Plan        []sim.StageAlloc // one per stage of Bracket
	NodeGPUs    int              // GPUs of a node
	Metric      string           // the objective's metric, reported each iteration
	Instance    string           // the nodes' instance type
	PricePerH   float64
	IterSeconds float64 // one iteration on one GPU
	Seed        uint64
	// Unfinished, when above 0, stops the journal after that many stages synced: a run under way
	// (no finish, its next stage begun with half its trials done).
	Unfinished int
}

// SHA writes to w (a journal opened without syncs) the journal of a run of s as a driver
// writes it: start, a trial event per trial, then per stage its stage event, the node requests
// and node_ups (or node_downs) that bring the cluster to the plan, per trial a launch, a report
// each iteration and a done, in waves as the GPUs allow; a sync keeping the best third (the
// next stage's trials), a forecast; at the end the nodes' release and finish. It returns the
// number of events written.
func SHA(w *journal.Journal, s SHAShape) (int, error) {
	g := &gen{w: w, s: s, rng: rand.New(rand.NewPCG(s.Seed, 7)), at: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}
	g.emit(journal.Event{Ev: journal.EvStart, RunID: "r20000101-000000-synth"})
	n := s.Bracket.Trials()
	quality := make(map[string]float64, n)
	alive := make([]string, n)
	for i := range alive {
		alive[i] = fmt.Sprintf("b0-t%04d", i)
		quality[alive[i]] = 0.5 + 0.4*g.rng.Float64()
		g.emit(journal.Event{Ev: journal.EvTrial, Trial: alive[i]})
	}
	for k, st := range s.Bracket.Stages {
		alloc := s.Plan[k]
		g.emit(journal.Event{Ev: journal.EvStage, Stage: k, GPUs: alloc.GPUs})
		g.nodesTo(k, alloc.Nodes)
		per := max(1, min(s.NodeGPUs, alloc.GPUs/max(1, len(alive))))
		slots := max(1, alloc.GPUs/per)
		metric := map[string]float64{}
		last := k == len(s.Bracket.Stages)-1
		stop := len(alive)
		if s.Unfinished > 0 && k == s.Unfinished {
			stop = len(alive) / 2
		}
		for lo := 0; lo < stop; lo += slots {
			wave := alive[lo:min(lo+slots, stop)]
			began := g.at
			for j, id := range wave {
				node := g.held[(j*per/s.NodeGPUs)%len(g.held)]
				g.emit(journal.Event{Ev: journal.EvLaunch, Stage: k, Trial: id, Try: 1, GPUs: per, Nodes: []string{node}})
			}
			for it := st.StartIter + 1; it <= st.EndIter(); it++ {
				for _, id := range wave {
					g.at = g.at.Add(time.Duration(s.IterSeconds / float64(per) * (0.9 + 0.2*g.rng.Float64()) * float64(time.Second) / float64(len(wave))))
					m := quality[id] * (1 - math.Exp(-float64(it)/20))
					metric[id] = m
					g.emit(journal.Event{Ev: journal.EvReport, Stage: k, Trial: id, Iter: it, Metrics: map[string]float64{s.Metric: m}})
				}
			}
			for _, id := range wave {
				m := metric[id]
				g.emit(journal.Event{Ev: journal.EvDone, Stage: k, Trial: id, GPUs: per, Iter: st.EndIter(),
					Metrics: map[string]float64{s.Metric: m}, Metric: &m, Seconds: g.at.Sub(began).Seconds(), Began: began, Exited: g.at})
			}
		}
		if stop < len(alive) {
			return g.n, g.err
		}
		keep := slices.Clone(alive)
		slices.SortStableFunc(keep, func(a, b string) int { return cmp.Compare(metric[b], metric[a]) })
		if !last {
			keep = keep[:s.Bracket.Stages[k+1].Trials]
		} else {
			keep = keep[:1]
		}
		slices.Sort(keep)
		g.emit(journal.Event{Ev: journal.EvSync, Stage: k, Keep: keep})
		alive = keep
		if !last {
			g.emit(journal.Event{Ev: journal.EvForecast, Stage: k + 1, Reason: "the plan holds",
				After: &planner.Forecast{JCT: g.at.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Seconds() * 1.5, Cost: 100}})
		}
	}
	g.nodesTo(len(s.Bracket.Stages), 0)
	g.emit(journal.Event{Ev: journal.EvFinish})
	return g.n, g.err
}

// WriteSHA writes the journal SHA writes to a new journal file at path (not synced), and returns
// the number of events written.
func WriteSHA(path string, s SHAShape) (int, error) {
	w, _, err := journal.OpenJournalWith(path, journal.JournalOptions{NoSync: true})
	if err != nil {
		return 0, fmt.Errorf("synthesize journal: %w", err)
	}
	n, err := SHA(w, s)
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("synthesize journal: %w", cerr)
	}
	return n, err
}

// gen is SHA's writer: the clock it moves, the nodes held, the first error.
type gen struct {
	w      *journal.Journal
	s      SHAShape
	rng    *rand.Rand
	at     time.Time
	held   []string
	nextID int
	reqs   int
	n      int
	err    error
}

func (g *gen) emit(e journal.Event) {
	if g.err != nil {
		return
	}
	e.At = g.at
	if g.err = g.w.Note(e); g.err != nil {
		g.err = fmt.Errorf("synthesize journal: %w", g.err)
	}
	g.n++
}

// nodesTo brings the nodes held to want, as a driver does: a request, its node_ups and answer,
// or one node_down of the last ones up.
func (g *gen) nodesTo(stage, want int) {
	switch {
	case want > len(g.held):
		g.reqs++
		token := fmt.Sprintf("b0-r%d", g.reqs)
		g.emit(journal.Event{Ev: journal.EvRequest, Count: want - len(g.held), Token: token})
		for len(g.held) < want {
			g.nextID++
			id := fmt.Sprintf("v%04d", g.nextID)
			g.held = append(g.held, id)
			g.emit(journal.Event{Ev: journal.EvNodeUp, Stage: stage, Node: &cloud.Node{ID: id, GPUs: g.s.NodeGPUs,
				Addr: fmt.Sprintf("10.0.%d.%d", g.nextID/250, g.nextID%250+1), RunningAt: g.at, InstanceType: g.s.Instance,
				Market: cloud.OnDemand, PricePerHour: g.s.PricePerH, Token: token}})
		}
		g.emit(journal.Event{Ev: journal.EvAnswer, Token: token})
	case want < len(g.held):
		gone := slices.Clone(g.held[want:])
		slices.Reverse(gone)
		g.held = g.held[:want]
		g.emit(journal.Event{Ev: journal.EvNodeOff, Nodes: gone, Cause: string(journal.NodeReleased)})
	}
}

// shaSpec is a Successive Halving job of %TRIALS% trials (eta 3, 1 to 729 iterations: the
// issue's Fig-11 job) on 4-GPU nodes.
const shaSpec = `
name: large
deadline: 6h
seed: 1
objective: {metric: val_accuracy, mode: max}
algorithm:
  sha: {trials: %TRIALS%, min_iters: 1, max_iters: %MAXITERS%, eta: 3}
trainer: {command: [rubberband, trainer, synthetic]}
cluster: {gpus_per_node: 4, price_per_hour: 12.24, max_nodes: 256,
  scale_latency: {value: 0s}, init_latency: {value: 0s}}
profile:
  iter_latency: {1: {mean: 4, std: 0.1}, 2: {mean: 2.1, std: 0.05}, 4: {mean: 1.1, std: 0.03}}
  startup_latency: {value: 0s}
planner: {samples: 100, deadline_quantile: 0.5}
`

// Job is a Successive Halving job of trials trials (eta 3, 1 to maxIters iterations), its spec's
// text, and the shape of a run of it on an elastic plan that holds up to 1,024 GPUs (a GPU a
// trial while trials outnumber them, then up to 4): what SHA writes.
func Job(trials, maxIters int) (*spec.Experiment, []byte, SHAShape, error) {
	text := []byte(strings.NewReplacer("%TRIALS%", strconv.Itoa(trials), "%MAXITERS%", strconv.Itoa(maxIters)).Replace(shaSpec))
	exp, err := spec.Parse("large.yaml", text, nil)
	if err != nil {
		return nil, nil, SHAShape{}, fmt.Errorf("synthesize job: %w", err)
	}
	br := exp.Algorithm.Brackets()[0]
	plan := make([]sim.StageAlloc, len(br.Stages))
	for k, st := range br.Stages {
		gpus := 1024           // fewer GPUs than trials: the trials run in waves
		if st.Trials <= gpus { // as many GPUs to each trial (a plan's rule), a power of two
			per := 1
			for per < 4 && 2*per*st.Trials <= gpus {
				per *= 2
			}
			gpus = per * st.Trials
		}
		plan[k] = sim.StageAlloc{GPUs: gpus, Nodes: (gpus + 3) / 4}
	}
	return exp, text, SHAShape{Bracket: br, Plan: plan, NodeGPUs: 4, Metric: "val_accuracy", Instance: "p3.8xlarge",
		PricePerH: 12.24, IterSeconds: 4, Seed: 1}, nil
}
