package planner

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// ASHACandidate is one GPU schedule of an ASHA job and what it is predicted to do.
type ASHACandidate struct {
	Plan     sim.ASHAPlan `json:"plan"`
	JCT      sim.Summary  `json:"jct_s"`
	Cost     sim.Summary  `json:"cost_usd"`
	PMiss    float64      `json:"p_miss"`
	Feasible bool         `json:"feasible"`
	// Promotions[b][k] is the mean number of trials rung k of bracket b promotes.
	Promotions [][]float64 `json:"promotions"`
	// Interruptions is the mean number of spot interruptions the run meets.
	Interruptions float64 `json:"interruptions,omitempty"`
	quantile      float64 // JCT at the planning quantile
}

// ASHAResult is the plan of an ASHA job, with what it is compared with: the cheapest fixed
// number of GPUs held to the end (what Determined and Ray Tune run) and, when the synchronous
// planner found one, synchronous SHA's plan for the same trials and rungs.
type ASHAResult struct {
	Experiment string        `json:"experiment"`
	Trials     int           `json:"trials"`
	Rungs      []int         `json:"rungs"` // bracket 0's
	Deadline   float64       `json:"deadline_s"`
	Quantile   float64       `json:"deadline_quantile"`
	Elastic    ASHACandidate `json:"elastic"`
	Fixed      ASHACandidate `json:"fixed"`
	SHA        *Report       `json:"sha,omitempty"`
	Evaluated  int           `json:"evaluated"`
}

// ashaProblem prices schedules of one ASHA job on common random numbers (one seed for all).
type ashaProblem struct {
	m         *sim.Model
	cfg       spec.ASHA
	start     *sim.ASHAStart // where the run stands (a re-plan); nil: before it starts
	samples   int
	seed      uint64
	deadline  float64
	quantile  float64
	cache     map[string]ASHACandidate
	jcts      map[string][]float64 // each cached schedule's JCT by sample
	stop      func() bool
	evaluated int
	// grid puts node counts past 8 on a grid an eighth apart (the fixed sweep's, a descent
	// step's): a large job's (PlanASHA).
	grid bool
	// everyCount sweeps every fixed count, with no floor (fixedFloor): the plain way, for tests.
	everyCount bool
}

func (p *ashaProblem) evaluate(plan sim.ASHAPlan) (ASHACandidate, error) {
	c, _, err := p.evaluateSamples(plan)
	return c, err
}

// evaluateSamples is evaluate with the JCT of every sample.
func (p *ashaProblem) evaluateSamples(plan sim.ASHAPlan) (ASHACandidate, []float64, error) {
	plan = plan.Compact()
	key := plan.String()
	if c, ok := p.cache[key]; ok {
		return c, p.jcts[key], nil
	}
	out, err := p.m.SimulateASHAFrom(p.cfg, p.start, plan, p.samples, p.seed)
	if err != nil {
		return ASHACandidate{}, nil, err
	}
	p.evaluated++
	miss := 0
	for _, j := range out.JCT {
		if j > p.deadline {
			miss++
		}
	}
	c := ASHACandidate{Plan: plan, JCT: sim.Summarize(out.JCT), Cost: sim.Summarize(out.Cost),
		PMiss: float64(miss) / float64(len(out.JCT)), Promotions: out.Promotions, Interruptions: out.Interruptions, quantile: sim.Quantile(out.JCT, p.quantile)}
	c.Feasible = c.quantile <= p.deadline
	p.cache[key], p.jcts[key] = c, out.JCT
	return c, out.JCT, nil
}

// betterASHA: feasible first, then cheaper, then faster; among infeasible ones the faster.
func betterASHA(c, best ASHACandidate) bool {
	switch {
	case best.Plan.GPUs == nil:
		return true
	case c.Feasible != best.Feasible:
		return c.Feasible
	case !c.Feasible:
		return c.quantile < best.quantile
	case c.Cost.Mean != best.Cost.Mean:
		return c.Cost.Mean < best.Cost.Mean
	}
	return c.quantile < best.quantile
}

// PlanASHA plans an ASHA job: the cheapest fixed GPU count that meets the deadline at the
// quantile, then, from it and from the larger fixed counts that also meet it, the greedy
// descent of the paper's Algorithm 2 over the schedule's phases (one node less in one phase, and
// in the later phases that would hold more, at the best saving per second of JCT added at the
// quantile), cheapest result kept. GPU counts are whole nodes: a node's idle GPUs cost as much as
// its busy ones.
func PlanASHA(ctx context.Context, exp *spec.Experiment, m *sim.Model) (*ASHAResult, error) {
	cfg := *exp.Algorithm.ASHA
	large := cfg.Trials > LargeASHATrials && exp.Planner.Name != spec.PlannerOptimal
	p, best, fixed, err := searchASHA(ctx, exp, m, large)
	if err != nil {
		return nil, err
	}
	res := &ASHAResult{Experiment: exp.Name, Trials: cfg.Trials, Rungs: cfg.Rungs(0), Deadline: p.deadline, Quantile: p.quantile, Elastic: best, Fixed: fixed, Evaluated: p.evaluated}
	// Synchronous SHA of the same trials and rungs, planned as any SHA job is.
	if s, err := sim.For(exp); err == nil {
		if rep, _, err := Plan(ctx, exp, s, nil); err == nil {
			res.SHA = rep
		} else if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return res, nil
}

// LargeASHATrials is the most trials PlanASHA plans as it does any job. A larger job's
// simulations cost in proportion to its trials, and its schedules hold more nodes, so more of
// them: the search sees fewer samples (screenSamples: the first of the same streams, so that
// schedules are still compared on common random numbers), node counts past 8 an eighth apart,
// fixed counts from the fewest that meet the deadline (firstFeasible) and one descent (from the
// cheapest fixed count), and the schedules it picks, elastic and fixed, are priced again on
// every sample: what the plan predicts is the whole simulation's. What the shortcuts lose
// against the plain search is bounded by the grid (a phase's nodes within an eighth of the count
// the plain descent would stop at) and by the screen's sampling error: within 5% of the plain
// search's cost on small jobs forced through it (TestLargeASHAAgainstPlain), the same cost at
// 4,096 and 8,192 trials of issue 39's job.
const LargeASHATrials = 2048

// screenSamples is how many samples a large job's search sees: as many trials simulated as
// LargeASHATrials/2 trials' full samples would be, at least 8, at most all of them.
func screenSamples(samples, trials int) int {
	return min(samples, max(8, samples*LargeASHATrials/2/trials))
}

// onAllSamples prices a large job's picks again on every sample (the search saw a screen of
// them): what the plan predicts is then the whole simulation's. Should the fixed schedule come
// out ahead of the elastic one on all samples, it is the plan (a descent from it found it best
// on the screen).
// p prices on every sample from then on (its cache the picks').
func (p *ashaProblem) onAllSamples(samples int, best, fixed ASHACandidate) (ASHACandidate, ASHACandidate, error) {
	p.samples, p.cache, p.jcts = samples, map[string]ASHACandidate{}, map[string][]float64{}
	var err error
	if best, err = p.evaluate(best.Plan); err != nil {
		return best, fixed, err
	}
	if fixed, err = p.evaluate(fixed.Plan); err != nil {
		return best, fixed, err
	}
	if betterASHA(fixed, best) {
		best = fixed
	}
	return best, fixed, nil
}

// trialsLeft is the work left to a run from start, in trials: the job's trials times the share of
// its rungs' results (each rung's as RungStages counts them, at the least) not yet in. A
// re-plan's simulations cost in proportion to it.
func trialsLeft(cfg spec.ASHA, start *sim.ASHAStart) int {
	total, done := 0, 0
	for b, br := range cfg.RungStages() {
		for k, st := range br.Stages {
			total += st.Trials
			if start != nil && start.Ladder != nil {
				done += min(st.Trials, start.Ladder.Results(b, k))
			}
		}
	}
	if total == 0 {
		return cfg.Trials
	}
	return int(math.Ceil(float64(cfg.Trials) * float64(total-done) / float64(total)))
}

// starts is how many of the cheapest fixed counts the greedy descends from: 4, or for a large
// job's search 1 (each descent there costs some 70 simulations, and on the Fig. 11 job of
// 32,768 trials the four ended within 1% of each other).
func (p *ashaProblem) starts() int {
	if p.grid {
		return 1
	}
	return 4
}

// nodeStep is how many nodes a count of n steps by: 1, or an eighth of n on the grid.
func (p *ashaProblem) nodeStep(n int) int {
	if !p.grid {
		return 1
	}
	return max(1, n/8)
}

// searchASHA is PlanASHA's search of exp's schedules: the plain one, or a large job's (large:
// a screen of the samples, the picks priced on all of them).
func searchASHA(ctx context.Context, exp *spec.Experiment, m *sim.Model, large bool) (p *ashaProblem, best, fixed ASHACandidate, err error) {
	p = &ashaProblem{m: m, cfg: *exp.Algorithm.ASHA, samples: exp.Planner.Samples, seed: uint64(exp.Seed), deadline: exp.Deadline.Seconds(),
		quantile: exp.Planner.DeadlineQuantile, cache: map[string]ASHACandidate{}, jcts: map[string][]float64{}, stop: func() bool { return ctx.Err() != nil }}
	if p.deadline <= 0 {
		p.deadline = math.Inf(1)
	}
	search := p.search
	if exp.Planner.Name == spec.PlannerOptimal {
		search = p.exhaust
	}
	if large {
		p.samples, p.grid = screenSamples(p.samples, p.cfg.Trials), true
	}
	if best, fixed, err = search(); err != nil {
		return p, best, fixed, err
	}
	if p.stop() {
		return p, best, fixed, ctx.Err()
	}
	if large {
		best, fixed, err = p.onAllSamples(exp.Planner.Samples, best, fixed)
	}
	return p, best, fixed, err
}

// nextCount is the fixed count after n nodes in the sweep: the next on the grid, or most where
// the grid would pass it (the most nodes are the fastest fixed schedule, the one kept when none
// meets the deadline).
func (p *ashaProblem) nextCount(n, most int) int {
	next := n + p.nodeStep(n)
	if n < most && next > most {
		return most
	}
	return next
}

// MaxExactASHA is how many schedules the exact ASHA planner may enumerate: past it, planner
// optimal is refused for the job (greedy plans it).
const MaxExactASHA = 20000

// exhaust is the exact planner: every schedule (a non-increasing count of whole nodes per phase,
// as many phases as the rungs, up to max_nodes) priced on the same common random numbers as the
// greedy search, the best kept (betterASHA). It is for small jobs: a check of the greedy descent.
func (p *ashaProblem) exhaust() (best, fixed ASHACandidate, err error) {
	step, most, phases := p.bounds()
	if n := schedules(most, phases); n > MaxExactASHA {
		return best, fixed, fmt.Errorf("planner optimal: %d GPU schedules of %d phases over up to %d nodes; it enumerates at most %d (use greedy)", n, phases, most, MaxExactASHA)
	}
	var walk func(gpus []int, top int) error
	walk = func(gpus []int, top int) error {
		if p.stop() {
			return nil
		}
		if len(gpus) == phases {
			c, err := p.evaluate(sim.ASHAPlan{GPUs: slices.Clone(gpus)})
			if err != nil {
				return err
			}
			if betterASHA(c, best) {
				best = c
			}
			if len(c.Plan.GPUs) == 1 && betterASHA(c, fixed) {
				fixed = c
			}
			return nil
		}
		for n := top; n >= 1; n-- {
			if err := walk(append(gpus, n*step), n); err != nil {
				return err
			}
		}
		return nil
	}
	err = walk(make([]int, 0, phases), most)
	return best, fixed, err
}

// bounds are the schedules' terms: GPUs a node, the most nodes, the phases (one a rung).
func (p *ashaProblem) bounds() (step, most, phases int) {
	most = p.m.MaxNodes
	if most <= 0 {
		most = 64
	}
	return p.m.GPUsPerNode, min(most, p.m.NodesFor(p.cfg.Trials)), len(p.cfg.Rungs(0))
}

// schedules counts the non-increasing sequences of phases counts from 1 to most: C(most+phases-1,
// phases), capped past MaxExactASHA.
func schedules(most, phases int) int {
	n := 1
	for i := 1; i <= phases; i++ {
		n = n * (most + i - 1) / i
		if n > 100*MaxExactASHA {
			return n
		}
	}
	return n
}

// search finds the cheapest schedule that meets the deadline at the quantile (or the fastest,
// when none does), and the best fixed one.
func (p *ashaProblem) search() (best, fixed ASHACandidate, err error) {
	cfg := p.cfg
	step, most, _ := p.bounds()
	floor, err := p.fixedFloor(most)
	if err != nil {
		return best, fixed, err
	}
	first := 1
	if p.grid {
		if first, err = p.firstFeasible(step, most); err != nil {
			return best, fixed, err
		}
	}
	var feasibleFixed []ASHACandidate
	for n := first; n <= most && !p.stop(); n = p.nextCount(n, most) {
		if k := p.starts(); len(feasibleFixed) >= k && float64(n)*floor > cheapest(feasibleFixed, k) {
			break // this count and every larger one cost more than the descents' starts found
		}
		c, err := p.evaluate(sim.ASHAPlan{GPUs: []int{n * step}})
		if err != nil {
			return best, fixed, err
		}
		if betterASHA(c, fixed) {
			fixed = c
		}
		if c.Feasible {
			feasibleFixed = append(feasibleFixed, c)
		}
	}
	if p.stop() {
		return best, fixed, nil
	}
	// Greedy from the cheapest few fixed counts that meet the deadline (or the fastest, when none
	// does): holding more at the start can end cheaper once the drain is elastic.
	starts := feasibleFixed
	slices.SortStableFunc(starts, func(a, b ASHACandidate) int { return cmp.Compare(a.Cost.Mean, b.Cost.Mean) })
	starts = starts[:min(len(starts), p.starts())]
	if len(starts) == 0 {
		starts = []ASHACandidate{fixed}
	}
	for _, s := range starts {
		gpus := make([]int, len(cfg.Rungs(0)))
		for j := range gpus {
			gpus[j] = s.Plan.GPUs[0]
		}
		c, err := p.descend(gpus, step)
		if err != nil {
			return best, fixed, err
		}
		if betterASHA(c, best) {
			best = c
		}
	}
	return best, fixed, nil
}

// fixedFloor is what each node of a fixed schedule costs at least, the mean over the samples
// (0 where there is no such bound: spot nodes are replaced, per-function billing follows the
// jobs). Every node of a fixed schedule is held, at its price, from its start (a draw of
// SCALE) to the end, and the run takes no less on fewer nodes than on the most: cost(n) >=
// n * price * (JCT(most) - mean SCALE), JCT(most) given a tenth's slack for the sampling noise
// and for the promotions, which do not always come sooner with more slots. The sweep of fixed
// counts stops where that bound passes the cheapest found that the descents start from (the
// best fixed among them): past a few nodes the bound grows by the price of the winner's whole run
// per node, and sweeping every count to max_nodes was most of an ASHA plan's time.
func (p *ashaProblem) fixedFloor(most int) (float64, error) {
	if p.m.Spot != nil || p.m.PerFunction || most < 8 || p.everyCount {
		return 0, nil
	}
	c, err := p.evaluate(sim.ASHAPlan{GPUs: []int{most * p.m.GPUsPerNode}})
	if err != nil {
		return 0, err
	}
	return max(0, p.m.NodePricePerSecond*(0.9*c.JCT.Mean-p.m.Scale.Mean())), nil
}

// firstFeasible is, for a large job's search, the fewest nodes on the grid whose fixed schedule
// meets the deadline, by a galloping search, then a bisection (fewer nodes never finish sooner,
// but for the noise), or 1 when even the most nodes miss it (the sweep then looks for the
// fastest). The sweep starts there: the counts below it are no descent's start and not the best
// fixed schedule.
func (p *ashaProblem) firstFeasible(step, most int) (int, error) {
	var grid []int
	for n := 1; n <= most; n = p.nextCount(n, most) {
		grid = append(grid, n)
	}
	feasible := func(i int) (bool, error) {
		c, err := p.evaluate(sim.ASHAPlan{GPUs: []int{grid[i] * step}})
		return c.Feasible, err
	}
	lo, hi := 0, len(grid)-1
	for i := 0; i < hi; i = 2*i + 1 { // 1, 2, 4, 8, ... nodes below 9: a small job's is found at once
		ok, err := feasible(i)
		if err != nil {
			return 1, err
		}
		if ok {
			hi = i
			break
		}
		lo = i + 1
	}
	if hi == len(grid)-1 {
		if ok, err := feasible(hi); err != nil || !ok {
			return 1, err
		}
	}
	for lo < hi && !p.stop() {
		mid := (lo + hi) / 2
		ok, err := feasible(mid)
		if err != nil {
			return 1, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return grid[lo], nil
}

// cheapest is the k-th lowest mean cost of cs (len(cs) >= k).
func cheapest(cs []ASHACandidate, k int) float64 {
	costs := make([]float64, len(cs))
	for i, c := range cs {
		costs[i] = c.Cost.Mean
	}
	slices.Sort(costs)
	return costs[k-1]
}

// descend is the greedy descent from a schedule. One that misses the deadline is kept as it is:
// cheaper steps from it would only miss by more, and a plan that misses is the fastest found.
func (p *ashaProblem) descend(gpus []int, step int) (ASHACandidate, error) {
	cur, err := p.evaluate(sim.ASHAPlan{GPUs: gpus})
	if err != nil {
		return ASHACandidate{}, err
	}
	for cur.Feasible && !p.stop() {
		var next ASHACandidate
		var nextGPUs []int
		bestScore := math.Inf(-1)
		for j := range gpus {
			if gpus[j]-step < 1 {
				continue
			}
			cand := slices.Clone(gpus)
			cand[j] -= step * p.nodeStep(gpus[j]/step)
			for k := j + 1; k < len(cand); k++ {
				cand[k] = min(cand[k], cand[j])
			}
			c, err := p.evaluate(sim.ASHAPlan{GPUs: cand})
			if err != nil {
				return ASHACandidate{}, err
			}
			saved := cur.Cost.Mean - c.Cost.Mean
			if !c.Feasible || saved <= 0 {
				continue
			}
			score := saved / math.Max(c.quantile-cur.quantile, 1e-3)
			if score > bestScore {
				bestScore, next, nextGPUs = score, c, cand
			}
		}
		if next.Plan.GPUs == nil {
			return cur, nil
		}
		cur, gpus = next, nextGPUs
	}
	return cur, nil
}

// WriteTable prints an ASHA job's plan beside the best fixed-slot ASHA and synchronous SHA, in
// the house style of every plan table (package format's times and money, P(miss) in percent),
// what the elastic schedule costs against fixed slots, and, where synchronous SHA is cheaper or
// safer than the elastic schedule, says so: ASHA is not always the better choice.
func (r *ASHAResult) WriteTable(w io.Writer) {
	rungs := make([]string, len(r.Rungs))
	for i, it := range r.Rungs {
		rungs[i] = fmt.Sprint(it)
	}
	fmt.Fprintf(w, "%s · asha, %d trials, rungs at %s iterations · deadline %s at p%.0f · %d schedules simulated\n\n",
		r.Experiment, r.Trials, strings.Join(rungs, ", "), format.Clock(r.Deadline), 100*r.Quantile, r.Evaluated)
	head := []string{"PLAN", "GPUS", "JCT", "P5", "P95", "COST", "P5", "P95", "P(MISS)"}
	spot := r.Elastic.Interruptions > 0 || r.Fixed.Interruptions > 0 // a column only where the market is spot
	if spot {
		head = append(head, "SPOT INTERRUPTIONS")
	}
	tw := format.NewTable(w, head...)
	row := func(name, gpus string, p Prediction, interruptions float64) {
		cells := []any{name, gpus, format.Clock(p.JCT.Mean), format.Clock(p.JCT.P5), format.Clock(p.JCT.P95),
			format.Money(p.Cost.Mean), format.Money(p.Cost.P5), format.Money(p.Cost.P95), fmt.Sprintf("%.0f%%", 100*p.DeadlineMissProb)}
		if spot {
			cells = append(cells, fmt.Sprintf("%.1f", interruptions))
		}
		tw.Row(cells...)
	}
	row("asha, elastic", r.Elastic.Plan.String(), r.Elastic.prediction(), r.Elastic.Interruptions)
	row("asha, fixed slots", r.Fixed.Plan.String(), r.Fixed.prediction(), r.Fixed.Interruptions)
	if r.SHA != nil {
		row("sha, synchronous", "by stage", r.SHA.Predicted, 0)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if r.Fixed.Cost.Mean > 0 {
		fmt.Fprintf(w, "elastic against fixed slots: %.0f%% of the cost\n", 100*r.Elastic.Cost.Mean/r.Fixed.Cost.Mean)
	}
	if advice := r.shaAdvice(); advice != "" {
		fmt.Fprintln(w, advice)
	}
}

func (c ASHACandidate) prediction() Prediction {
	return Prediction{JCT: c.JCT, Cost: c.Cost, DeadlineMissProb: c.PMiss}
}

// shaAdvice says when synchronous SHA of the same trials is cheaper or safer than the elastic
// ASHA schedule (it often is for short jobs: no slot waits for a straggler's rung, yet no
// barrier either), or "" when it is neither.
func (r *ASHAResult) shaAdvice() string {
	if r.SHA == nil || r.SHA.Predicted.Cost.Mean <= 0 {
		return ""
	}
	sha, e := r.SHA.Predicted, r.Elastic
	cheaper := sha.Cost.Mean < e.Cost.Mean
	safer := sha.DeadlineMissProb < e.PMiss
	var what string
	switch {
	case cheaper && safer:
		what = "cheaper and safer"
	case cheaper && sha.DeadlineMissProb <= e.PMiss:
		what = "cheaper"
	case cheaper:
		what = fmt.Sprintf("cheaper, though it misses the deadline more often (%.0f%% against %.0f%%)", 100*sha.DeadlineMissProb, 100*e.PMiss)
	case safer && sha.Cost.Mean <= e.Cost.Mean*1.05:
		what = "safer, at about the cost"
	default:
		return ""
	}
	return fmt.Sprintf("synchronous SHA of these trials is %s: %s and P(miss) %.0f%% against ASHA's %s and %.0f%%; to run it, replace algorithm.asha with algorithm.sha (same trials, min_iters, max_iters, eta)",
		what, format.Money(sha.Cost.Mean), 100*sha.DeadlineMissProb, format.Money(e.Cost.Mean), 100*e.PMiss)
}

// Report is the plan file of an ASHA job (`plan --out`, a run's plan.json): its elastic
// schedule's prediction, the whole comparison beside it.
func (r *ASHAResult) Report(exp *spec.Experiment) *Report {
	e := r.Elastic
	return &Report{Experiment: exp.Name, Planner: "asha", DeadlineS: r.Deadline, DeadlineQuantile: r.Quantile,
		Samples: exp.Planner.Samples, Seed: exp.Seed, Feasible: e.Feasible, Cluster: clusterInfo(exp),
		Predicted: Prediction{JCT: e.JCT, Cost: e.Cost, DeadlineMissProb: e.PMiss}, Evaluated: r.Evaluated,
		BudgetUSD: exp.Budget.MaxCostUSD, ASHA: r}
}

// Check says, with a DeadlineError, when the elastic schedule misses exp's deadline at its
// quantile (as Result.Check does for stages).
func (r *ASHAResult) Check(exp *spec.Experiment) error {
	if r.Elastic.Feasible {
		return nil
	}
	return &DeadlineError{Deadline: exp.Deadline.D(), Quantile: r.Quantile, JCT: r.Elastic.quantile, Found: true}
}

// What an ASHA job's outcomes are named in a comparison (CompareASHA, whatif's columns).
const (
	ASHAElastic = "asha-elastic" // the planned GPU schedule
	ASHAFixed   = "asha-fixed"   // the cheapest fixed number of slots that meets the deadline
	SHASync     = "sha"          // synchronous SHA of the same trials and rungs, planned by stage
)

// ASHAOutcomes are CompareASHA's names, in the order a table shows them.
func ASHAOutcomes() []string { return []string{ASHAElastic, ASHAFixed, SHASync} }

// CompareASHA plans an ASHA job (PlanASHA) and gives what Compare gives for stages: its elastic
// schedule, the best fixed slots and synchronous SHA (left out when it has no plan), the elastic
// schedule's saving against fixed slots when both meet the deadline.
func CompareASHA(ctx context.Context, exp *spec.Experiment) (map[string]Outcome, error) {
	m, err := sim.NewModel(exp)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	res, err := PlanASHA(ctx, exp, m)
	if err != nil {
		return nil, err
	}
	out := map[string]Outcome{}
	for name, c := range map[string]ASHACandidate{ASHAElastic: res.Elastic, ASHAFixed: res.Fixed} {
		plan := c.Plan
		out[name] = Outcome{Feasible: c.Feasible, Predicted: Prediction{JCT: c.JCT, Cost: c.Cost, DeadlineMissProb: c.PMiss}, ASHA: &plan}
	}
	if res.SHA != nil {
		out[SHASync] = Outcome{Feasible: res.SHA.Feasible, Predicted: res.SHA.Predicted}
	}
	if e, f := res.Elastic, res.Fixed; e.Feasible && f.Feasible && f.Cost.Mean > 0 {
		saving := 100 * (1 - e.Cost.Mean/f.Cost.Mean)
		o := out[ASHAElastic]
		o.SavingPct = &saving
		out[ASHAElastic] = o
	}
	return out, nil
}

// ASHAPresent is where an ASHA run stands when it enters a phase of its plan (or passes a
// milestone of its first) and the driver weighs a revision of the schedule from there on.
type ASHAPresent struct {
	Start sim.ASHAStart
	// Plan is the current schedule from the phase the run is in (its phase 0: now).
	Plan sim.ASHAPlan
	// Elapsed is spec seconds since the run started; Spent dollars spent so far.
	Elapsed, Spent float64
}

// ReplanASHA decides, on the model as the run has observed it, whether an ASHA run's schedule
// from the phase it is in should change, by the rules Replan follows for stages (decide): the
// current schedule's forecast from where the run stands (sim.SimulateASHAFrom), against the
// cheapest one PlanASHA's search finds for the time left on the cautious model. The new
// schedule may hold more GPUs now than the current one (a run fallen behind), fewer later.
// A job of over LargeASHATrials trials is searched as PlanASHA searches it, on a screen of the
// samples sized by the work left (trialsLeft): a review at 32,768 trials would otherwise
// simulate the rest of the run some hundreds of times on every sample.
// It is a pure function of its arguments.
func ReplanASHA(m *sim.Model, cfg spec.ASHA, now ASHAPresent, rules ReplanRules) (Revision, error) {
	screen := 0
	if cfg.Trials > LargeASHATrials {
		screen = screenSamples(rules.Samples, trialsLeft(cfg, &now.Start))
	}
	return replanASHA(m, cfg, now, rules, screen)
}

// replanASHA is ReplanASHA, its search the plain one (screen 0) or a large job's, as PlanASHA's:
// on the grid, on the first screen samples, the pick priced on all of them.
func replanASHA(m *sim.Model, cfg spec.ASHA, now ASHAPresent, rules ReplanRules, screen int) (Revision, error) {
	if err := m.CheckASHA(now.Plan); err != nil {
		return Revision{}, fmt.Errorf("replan: %w", err)
	}
	cautious := *m
	cautious.Uncertainty = rules.Uncertainty
	large := screen > 0
	if !large {
		screen = rules.Samples
	}
	problem := func(m *sim.Model, left float64) *ashaProblem {
		return &ashaProblem{m: m, cfg: cfg, start: &now.Start, samples: rules.Samples, seed: uint64(rules.Seed), deadline: max(left, 1e-9),
			quantile: rules.Quantile, cache: map[string]ASHACandidate{}, jcts: map[string][]float64{}, stop: func() bool { return false }, grid: large}
	}
	rest := func(c ASHACandidate, jcts []float64) restPlan[sim.ASHAPlan] {
		return restPlan[sim.ASHAPlan]{plan: c.Plan, feasible: c.Feasible, jct: c.quantile, jcts: jcts, cost: c.Cost.Mean}
	}
	left := rules.Deadline - now.Elapsed
	means := problem(m, left)
	cur := now.Plan.Compact()
	d := decision[sim.ASHAPlan]{rules: rules, elapsed: now.Elapsed, spent: now.Spent, current: &cur,
		same: func(a, b sim.ASHAPlan) bool { return a.Compact().String() == b.Compact().String() },
		forecast: func(p sim.ASHAPlan) (restPlan[sim.ASHAPlan], error) {
			c, jcts, err := means.evaluateSamples(p)
			return rest(c, jcts), err
		},
		cheapest: func(left float64) (restPlan[sim.ASHAPlan], error) {
			q := problem(&cautious, left)
			q.samples = screen
			best, fixed, err := q.search()
			if err == nil && screen < rules.Samples {
				best, _, err = q.onAllSamples(rules.Samples, best, fixed)
			}
			if err != nil {
				return restPlan[sim.ASHAPlan]{}, err
			}
			_, jcts, err := q.evaluateSamples(best.Plan)
			return rest(best, jcts), err
		}}
	rev, plan, err := d.decide()
	rev.ASHA = plan
	return rev, err
}
