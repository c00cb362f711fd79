package planner

import (
	"fmt"
	"math"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Problem is one planning question: plan these brackets on this model, under this deadline
// (seconds) at this quantile of the simulated completion times.
type Problem struct {
	Sim      *sim.Simulator
	Deadline float64
	Quantile float64

	// Progress, when set, is told how many plans have been simulated, after each one: keep it
	// cheap (an atomic store), and draw from another goroutine.
	Progress func(evaluated int)
	// Stop, when set, is asked before each plan is simulated; once it says true, every plan
	// is weighed as infeasible without simulating it, so that a planner returns within moments
	// (a client gone, a deadline passed). The result is then meaningless: the caller discards it.
	Stop func() bool

	evaluated int
	fastest   Candidate
	// offers are the offers (indices in the model's Offers) plans may use; nil: all of them.
	offers []int
	// memo holds the greedy plan over each set of offers, within one planner run.
	memo map[string]Candidate
	// opts caches stage options per offer: opts[o][b][k].
	opts map[int][][][]int
}

// Restrict returns the same question with plans limited to the given offers (indices in the
// model's Offers): what `plan` compares its plan with (on-demand only, one type only). It
// shares the simulator, so its plans compare on the same draws.
func (p *Problem) Restrict(offers []int) *Problem {
	return &Problem{Sim: p.Sim, Deadline: p.Deadline, Quantile: p.Quantile, Progress: p.Progress, offers: append([]int(nil), offers...)}
}

// OffersWhere lists the model's offers (indices in its Offers) that keep says to: what Restrict
// takes.
func OffersWhere(m *sim.Model, keep func(*sim.Offer) bool) []int {
	var out []int
	for i, o := range m.Offers {
		if keep(o) {
			out = append(out, i)
		}
	}
	return out
}

// allowed lists the offers plans may use.
func (p *Problem) allowed() []int {
	if p.offers != nil {
		return p.offers
	}
	all := make([]int, len(p.model().Offers))
	for i := range all {
		all[i] = i
	}
	return all
}

// MaxWork bounds one prediction's Monte Carlo work: samples times the trial-stages it draws one
// by one (sim.Simulator.DrawnTrials: a stage whose chains of trials are normal is drawn whole,
// whatever its size). Every plan a planner weighs costs that much; past the bound a plan takes
// tens of minutes, so it is refused with what to change instead. 10,000 trials of SHA at 200
// samples are 3e6; a million trials at 200 samples, 3e8.
const MaxWork = 40_000_000

// Work is one prediction's Monte Carlo work, as MaxWork counts it.
func Work(s *sim.Simulator) int { return s.DrawnTrials() * s.Samples() }

// NewProblem checks the question and returns it.
func NewProblem(s *sim.Simulator, deadline, quantile float64) (*Problem, error) {
	if w := Work(s); w > MaxWork {
		per := s.DrawnTrials()
		if per > MaxWork {
			return nil, fmt.Errorf("plan: too big to plan: %d trial-stages (each stage's trials, summed; at most %.0e): plan fewer trials", per, float64(MaxWork))
		}
		return nil, fmt.Errorf("plan: too big to plan: %d samples of %d trial-stages are %.1e simulated trial-stages per plan weighed (at most %.0e): "+
			"lower planner.samples to %d or fewer, or plan fewer trials", s.Samples(), per, float64(w), float64(MaxWork), max(1, MaxWork/per))
	}
	if !(deadline > 0) {
		return nil, fmt.Errorf("plan: a deadline is required (set deadline in the spec or --deadline)")
	}
	if !(quantile > 0 && quantile <= 1) {
		return nil, fmt.Errorf("plan: deadline quantile %v is not in (0, 1]", quantile)
	}
	return &Problem{Sim: s, Deadline: deadline, Quantile: quantile}, nil
}

// Candidate is an evaluated allocation.
type Candidate struct {
	Alloc sim.Alloc
	// JCT is the completion time at the deadline quantile; Cost the mean cost.
	JCT, Cost float64
	Feasible  bool
	outcome   sim.Outcome
}

// Result is what a planner returns: the cheapest feasible plan it found, or, when none meets the
// deadline, the fastest plan it saw (Feasible false).
type Result struct {
	Planner   string
	Best      Candidate
	Feasible  bool
	Evaluated int
	// Exact says the optimal planner searched its whole space: no plan in it is cheaper. False
	// for the other planners, and for an optimal search cut short (too large a job, or stopped).
	Exact bool
}

func (p *Problem) model() *sim.Model        { return p.Sim.Model() }
func (p *Problem) brackets() []spec.Bracket { return p.Sim.Brackets() }

// need is how many samples must finish by the deadline: nearest-rank quantile <= deadline.
func (p *Problem) need() int {
	return max(1, int(math.Ceil(p.Quantile*float64(p.Sim.Samples())-1e-9)))
}

// meets reports whether enough samples of jct finish by the deadline.
func (p *Problem) meets(jct []float64) bool {
	n := 0
	for _, x := range jct {
		if x <= p.Deadline {
			n++
		}
	}
	return n >= p.need()
}

// stopped reports whether Stop says the planning is to end.
func (p *Problem) stopped() bool { return p.Stop != nil && p.Stop() }

// evaluate predicts an allocation that passes Check (an infeasible nothing once stopped).
func (p *Problem) evaluate(a sim.Alloc) Candidate {
	if p.stopped() {
		return Candidate{Alloc: a, JCT: math.Inf(1), Cost: math.Inf(1)}
	}
	out := p.Sim.Evaluate(a)
	c := Candidate{Alloc: a, JCT: sim.Quantile(out.JCT, p.Quantile), Cost: mean(out.Cost), Feasible: p.meets(out.JCT), outcome: out}
	p.evaluated++
	if p.Progress != nil {
		p.Progress(p.evaluated)
	}
	if p.fastest.Alloc == nil || c.JCT < p.fastest.JCT || (c.JCT == p.fastest.JCT && c.Cost < p.fastest.Cost) {
		p.fastest = c
	}
	return c
}

// valid evaluates an allocation if it fits the model, and reports whether it did.
func (p *Problem) valid(a sim.Alloc) (Candidate, bool) {
	if p.model().Check(p.brackets(), a) != nil {
		return Candidate{}, false
	}
	return p.evaluate(a), true
}

// better reports whether c beats best: feasible first, then cheaper, then faster.
func better(c, best Candidate) bool {
	switch {
	case best.Alloc == nil:
		return true
	case c.Feasible != best.Feasible:
		return c.Feasible
	case !c.Feasible:
		return c.JCT < best.JCT
	case c.Cost != best.Cost:
		return c.Cost < best.Cost
	default:
		return c.JCT < best.JCT
	}
}

// result wraps the best candidate; when nothing was feasible it reports the fastest plan seen.
func (p *Problem) result(name string, best Candidate) Result {
	if !best.Feasible && p.fastest.Alloc != nil {
		best = p.fastest
	}
	return Result{Planner: name, Best: best, Feasible: best.Feasible, Evaluated: p.evaluated}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Options lists the GPU counts a stage of n trials may get on the model's default offer.
func Options(m *sim.Model, n int) []int { return OptionsOn(m.Offer, m.MaxNodes, n) }

// OptionsOn lists the GPU counts a stage of n trials may get on an offer, ascending: factors of
// n below n (trials in even waves on single GPUs) and n times every placeable GPU count per
// trial, within max_nodes. Stepping down this list is the paper's "smallest step that keeps the
// allocation a factor or multiple of the number of trials".
func OptionsOn(o *sim.Offer, maxNodes, n int) []int {
	var opts []int
	for d := 1; d < n; d++ {
		if n%d == 0 && o.NodesFor(d) <= maxNodes {
			opts = append(opts, d)
		}
	}
	for g := 1; g <= o.MaxGPUsPerTrial(); g++ {
		if o.ValidTrialGPUs(g) && o.NodesFor(n*g) <= maxNodes {
			opts = append(opts, n*g)
		}
	}
	return opts
}

// options lists the allocation options of every stage of every bracket on offer o.
func (p *Problem) options(o int) [][][]int {
	if opts, ok := p.opts[o]; ok {
		return opts
	}
	m := p.model()
	opts := make([][][]int, len(p.brackets()))
	for b, br := range p.brackets() {
		for _, st := range br.Stages {
			opts[b] = append(opts[b], OptionsOn(m.Offers[o], m.MaxNodes, st.Trials))
		}
	}
	if p.opts == nil {
		p.opts = map[int][][][]int{}
	}
	p.opts[o] = opts
	return opts
}

// stageAlloc is g GPUs of offer o on the nodes they need.
func (p *Problem) stageAlloc(g, o int) sim.StageAlloc {
	m := p.model()
	return m.On(sim.StageAlloc{GPUs: g, Nodes: m.Offers[o].NodesFor(g)}, o)
}

// snap returns the largest option at most g, or the smallest option.
func snap(opts []int, g int) int {
	best := opts[0]
	for _, o := range opts {
		if o <= g {
			best = o
		}
	}
	return best
}

// Run plans with the named planner.
func Run(p *Problem, name string) (Result, error) {
	switch name {
	case spec.PlannerStatic:
		return Static(p), nil
	case spec.PlannerNaiveElastic:
		return NaiveElastic(p), nil
	case spec.PlannerGreedy:
		return Greedy(p), nil
	case spec.PlannerOptimal:
		return Optimal(p), nil
	default:
		return Result{}, fmt.Errorf("plan: unknown planner %q", name)
	}
}
