package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
	"github.com/rubberband-hpo/rubberband/trial/builtin/synthetic"
)

// Case is one benchmark setting: an objective searched by an algorithm.
type Case struct {
	Objective string
	// Algorithm is "sha" (81 trials, 1 to 27 iterations, eta 3) or "hyperband" (1 to 27, eta 3,
	// Rounds rounds).
	Algorithm string
	Rounds    int
	// Rank is what the job ranks by: the benchmark's own objectives (RankOwn), its first loss
	// alone (RankFirst), or its first loss and each trial's cost_usd (RankCost).
	Rank string
}

// What a Case ranks by.
const (
	RankOwn   = ""
	RankFirst = "first"
	RankCost  = "cost"
)

func (c Case) String() string {
	if c.Algorithm == "hyperband" {
		return fmt.Sprintf("%s, hyperband x%d rounds", c.Objective, c.Rounds)
	}
	return fmt.Sprintf("%s, %s", c.Objective, c.Algorithm)
}

// Point is where a run stood after a result: what it had spent and its regret.
type Point struct {
	Iters   float64 `json:"iters"`   // iterations trained, all trials together
	Dollars float64 `json:"dollars"` // the GPU time of those iterations, at the cluster's price
	Regret  float64 `json:"regret"`  // Final(incumbent) - optimum
}

// Trajectory is one run's regret as it spent.
type Trajectory struct {
	Sampler string  `json:"sampler"`
	Seed    int     `json:"seed"`
	Points  []Point `json:"points"`
}

// Final is the regret at the end.
func (t Trajectory) Final() float64 {
	if len(t.Points) == 0 {
		return math.Inf(1)
	}
	return t.Points[len(t.Points)-1].Regret
}

// At is the regret after spending iters iterations (+Inf before the first result).
func (t Trajectory) At(iters float64) float64 {
	i := sort.Search(len(t.Points), func(i int) bool { return t.Points[i].Iters > iters })
	if i == 0 {
		return math.Inf(1)
	}
	return t.Points[i-1].Regret
}

// Spec is the job of a case under a sampler and seed, as YAML: nodes of 4 GPUs at $3.06 per
// GPU-hour, ten seconds per iteration, no deadline to speak of: the planner picks the cheapest
// plan, whose stages run in waves (which an adaptive sampler learns between).
func Spec(c Case, sampler string, seed int) (string, error) {
	o, err := objective.Lookup(c.Objective)
	if err != nil {
		return "", err
	}
	alg := "sha: {trials: 81, min_iters: 1, max_iters: 27, eta: 3}"
	if c.Algorithm == "hyperband" {
		alg = fmt.Sprintf("hyperband: {min_iters: 1, max_iters: 27, eta: 3, rounds: %d}", max(c.Rounds, 1))
	} else if c.Algorithm != "sha" {
		return "", fmt.Errorf("bench: algorithm %q (sha or hyperband)", c.Algorithm)
	}
	var b strings.Builder
	objectives := "objective: {metric: loss, mode: min}"
	first := "loss"
	if o.Multi != nil {
		first = o.Multi.Metrics[0]
	}
	switch c.Rank {
	case RankFirst:
		objectives = "objective: {metric: " + first + ", mode: min}"
	case RankCost:
		objectives = "objectives: [{metric: " + first + ", mode: min}, {metric: " + spec.CostMetric + ", mode: min}]"
	case RankOwn:
	default:
		return "", fmt.Errorf("bench: rank %q (%q, %q or %q)", c.Rank, RankOwn, RankFirst, RankCost)
	}
	if o.Multi != nil && c.Rank == RankOwn {
		var list []string
		for _, m := range o.Multi.Metrics {
			list = append(list, "{metric: "+m+", mode: min}")
		}
		objectives = "objectives: [" + strings.Join(list, ", ") + "]"
	}
	fmt.Fprintf(&b, "name: bench-%s\ndeadline: 1000h\nseed: %d\n%s\nalgorithm: {%s}\n", c.Objective, seed, objectives, alg)
	fmt.Fprintf(&b, "sampler: {name: %s}\nsearch_space:\n", sampler)
	for _, name := range spec.ParamOrder(o.Space) {
		b.WriteString("  " + name + ": " + paramYAML(o.Space[name]) + "\n")
	}
	fmt.Fprintf(&b, `trainer:
  command: [rubberband, trainer, synthetic, --spec, bench.yaml]
  env: {%s: %s}
cluster:
  gpus_per_node: 4
  price_per_hour: 12.24
  billing: {model: per-instance, increment: 1s, minimum: 0s}
  scale_latency: {dist: constant, value: 30s}
  init_latency: {dist: constant, value: 10s}
  max_nodes: 16
profile:
  iter_latency: {1: {mean: 10, std: 1}}
  startup_latency: {value: 5s}
planner: {name: greedy, samples: 20}
`, synthetic.ObjectiveVar, c.Objective)
	return b.String(), nil
}

func paramYAML(p spec.Param) string {
	var parts []string
	parts = append(parts, "type: "+p.Type)
	if p.Type == "choice" {
		vals := make([]string, len(p.Values))
		for i, v := range p.Values {
			vals[i] = fmt.Sprint(v)
		}
		parts = append(parts, "values: ["+strings.Join(vals, ", ")+"]")
	} else {
		parts = append(parts, fmt.Sprintf("min: %v", p.Min), fmt.Sprintf("max: %v", p.Max))
	}
	if len(p.When) > 0 {
		var conds []string
		for _, parent := range slices.Sorted(mapKeys(p.When)) {
			vals := make([]string, len(p.When[parent]))
			for i, v := range p.When[parent] {
				vals[i] = fmt.Sprint(v)
			}
			conds = append(conds, parent+": ["+strings.Join(vals, ", ")+"]")
		}
		parts = append(parts, "when: {"+strings.Join(conds, ", ")+"}")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// SplitSamplers splits "random,sobol,tpe, random_fraction: 0.1" into samplers at the commas
// that begin a sampler's name (a comma followed by an option stays with its sampler).
func SplitSamplers(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if strings.Contains(part, ":") && len(out) > 0 {
			out[len(out)-1] += "," + part
			continue
		}
		out = append(out, strings.TrimSpace(part))
	}
	return out
}

// Prepared is a case's job, parsed and planned once: sampler and seed change neither the plan
// nor the spec's shape.
type Prepared struct {
	Case  Case
	Alloc sim.Alloc
	// Iters is what one run trains in all (every stage's trials times its iterations).
	Iters int
}

// Prepare plans a case.
func Prepare(ctx context.Context, c Case) (*Prepared, error) {
	exp, err := parse(c, "random", 0)
	if err != nil {
		return nil, err
	}
	s, err := sim.For(exp)
	if err != nil {
		return nil, err
	}
	_, res, err := planner.Plan(ctx, exp, s, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: plan %s: %w", c, err)
	}
	p := &Prepared{Case: c, Alloc: res.Best.Alloc}
	for _, b := range exp.Algorithm.Brackets() {
		for _, st := range b.Stages {
			p.Iters += st.Trials * st.Iters
		}
	}
	return p, nil
}

func parse(c Case, sampler string, seed int) (*spec.Experiment, error) {
	src, err := Spec(c, sampler, seed)
	if err != nil {
		return nil, err
	}
	exp, err := spec.Parse("bench.yaml", []byte(src), nil)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", c, err)
	}
	return exp, nil
}

// Run runs one seed of a sampler on a prepared case in virtual time, in dir (its journal).
func (p *Prepared) Run(ctx context.Context, sampler string, seed int, dir string) (Trajectory, error) {
	exp, err := parse(p.Case, sampler, seed)
	if err != nil {
		return Trajectory{}, err
	}
	o, _ := objective.Lookup(p.Case.Objective)
	brackets := exp.Algorithm.Brackets()
	pricePerGPUSecond := exp.Cluster.PricePerHour / float64(exp.Cluster.GPUsPerNode) / 3600
	tr := Trajectory{Sampler: sampler, Seed: seed}
	params := map[string]spec.Config{}
	type best struct {
		loss   float64
		params spec.Config
	}
	atBudget := map[int]best{}
	top := 0
	var iters, dollars float64
	front := frontAt{} // several objectives: each budget's results
	observe := func(e journal.Event) {
		switch e.Ev {
		case journal.EvTrial, journal.EvLaunch:
			if e.Params != nil {
				params[e.Trial] = e.Params
			}
		case journal.EvDone:
			st := brackets[e.Bracket].Stages[e.Stage]
			iters += float64(st.Iters)
			dollars += e.Seconds * float64(e.GPUs) * pricePerGPUSecond
			if e.Metric == nil {
				return
			}
			budget := st.EndIter()
			if o.Multi != nil {
				top = max(top, budget)
				front.add(budget, e.Metrics, o.Multi.Metrics, params[e.Trial])
				tr.Points = append(tr.Points, Point{Iters: iters, Dollars: dollars, Regret: front.regret(top, o)})
				return
			}
			if b, ok := atBudget[budget]; !ok || *e.Metric < b.loss {
				atBudget[budget] = best{*e.Metric, params[e.Trial]}
			}
			top = max(top, budget)
			tr.Points = append(tr.Points, Point{Iters: iters, Dollars: dollars, Regret: o.Final(atBudget[top].params) - o.Optimum})
		}
	}
	out, err := virtual.Run(ctx, virtual.Config{Experiment: exp, Alloc: p.Alloc, Seed: int64(seed + 1),
		Journal: filepath.Join(dir, fmt.Sprintf("%s-%s-%d.jsonl", p.Case.Objective, sampler, seed)), RunID: "bench", Observe: observe, Bench: &o})
	if err != nil {
		return tr, fmt.Errorf("bench: %s %s seed %d: %w", p.Case, sampler, seed, err)
	}
	if !out.Result.Finished {
		return tr, fmt.Errorf("bench: %s %s seed %d did not finish", p.Case, sampler, seed)
	}
	return tr, nil
}

// frontAt keeps, per budget, the losses each trial reported there and its configuration.
type frontAt map[int]*results

type results struct {
	losses  [][]float64
	configs []spec.Config
}

func (f frontAt) add(budget int, metrics map[string]float64, names []string, c spec.Config) {
	r := f[budget]
	if r == nil {
		r = &results{}
		f[budget] = r
	}
	losses := make([]float64, len(names))
	for i, n := range names {
		v, ok := metrics[n]
		if !ok {
			v = math.NaN() // never reported: the worst
		}
		losses[i] = v
	}
	r.losses, r.configs = append(r.losses, losses), append(r.configs, c)
}

// regret measures the run's answer so far, as the single-objective incumbent is chosen: the
// front of the results at the largest budget reached (by what they reported), by the
// hypervolume its configurations' noise-free losses lack.
func (f frontAt) regret(top int, o objective.Objective) float64 {
	r := f[top]
	var finals [][]float64
	for _, i := range pareto.Front(r.losses) {
		finals = append(finals, o.Multi.Finals(r.configs[i]))
	}
	return o.Multi.Regret(finals)
}

// RunAll runs seeds 0..seeds-1 of every sampler on a case, as many at once as there are
// cores (each run is its own virtual world; the trajectories come back in sampler, then seed,
// order); progress, when set, is told of each run as it ends.
func RunAll(ctx context.Context, c Case, samplers []string, seeds int, progress func(done, total int)) (*Prepared, []Trajectory, error) {
	p, err := Prepare(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "rubberband-bench-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	total := len(samplers) * seeds
	out := make([]Trajectory, total)
	errs := make([]error, total)
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range total {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			out[i], errs[i] = p.Run(ctx, samplers[i/seeds], i%seeds, dir)
			mu.Lock()
			defer mu.Unlock()
			done++
			if progress != nil && errs[i] == nil {
				progress(done, total)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return p, out, nil
}
