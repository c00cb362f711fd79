package search

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/spec"
)

// TPE is the tree-structured Parzen estimator as BOHB uses it (Falkner et al., 2018): once a
// budget (iterations) has enough results, the trials with results at budgets from a third of the
// largest such one up are ranked, each at the largest budget it reached (fit); the best
// TopFraction of them make a "good" density l and the rest a "bad" density g, kernel densities (a Gaussian per numeric
// coordinate, Aitchison and Aitken's kernel per choice) with normal-reference bandwidths floored
// at MinBandwidth; Candidates points are drawn from l with its bandwidths widened
// BandwidthFactor times, and the one with the highest l/g is the draw. RandomFraction of draws,
// the first StartupTrials, and every draw before a budget has enough results are uniform at
// random.
//
// Two of Optuna's measures keep it from settling on the first good basin it finds: each
// density mixes in the uniform prior (the weight of one point), and every bandwidth is at least
// 1/(n+1) of the range for n points. By default the densities are products of one density per
// parameter (Optuna's independent TPE); Multivariate makes them BOHB's joint product-kernel
// density. Measured on search-bench's objectives (docs/search.md), the independent one ended
// 22% nearer Hartmann-6's optimum and level on the others.
//
// Conditional spaces, per active subset as BOHB and Optuna treat them: a coordinate inactive in
// a result or in the candidate contributes no factor, and a coordinate's density and bandwidth
// are fitted on the results where it is active.
type TPE struct {
	space map[string]spec.Param
	dims  []dim
	opt   spec.Sampler
	// encoded caches the points of the configurations named by Observation.Trial, and their
	// keys (their coordinates' bits): encoding a history's thousands of configurations, scattered
	// in memory, was most of a draw's time.
	encoded map[string]encodedTrial
	names   map[string]int // a parameter's coordinate
	// gaussTable holds exp(-z²/2) for z² from 0 to window², evenly: a draw sums a million
	// kernels, and an interpolated table is a third of the time of math.Exp, within 1e-6.
	gaussTable []float64
}

type encodedTrial struct {
	point []float64
	key   string
}

// gaussSteps is gaussTable's resolution.
const gaussSteps = 8192

// gauss is exp(-z2/2) for z2 in [0, window²], from the table.
func (t *TPE) gauss(z2 float64) float64 {
	f := z2 * (float64(gaussSteps) / (window * window)) // not the integer quotient, 327
	i := int(f)
	if i >= gaussSteps {
		return t.gaussTable[gaussSteps]
	}
	g := t.gaussTable[i : i+2 : i+2]
	return g[0] + (f-float64(i))*(g[1]-g[0])
}

// NewTPE returns the estimator of a space with the spec's options (defaults applied). It may
// be kept and drawn from again as results come; it is not safe for concurrent use.
func NewTPE(space map[string]spec.Param, opt spec.Sampler) *TPE {
	t := &TPE{space: space, dims: dims(space), opt: opt, gaussTable: make([]float64, gaussSteps+1),
		encoded: map[string]encodedTrial{}, names: map[string]int{}}
	for i, d := range t.dims {
		t.names[d.name] = i
	}
	for i := range t.gaussTable {
		t.gaussTable[i] = math.Exp(-0.5 * float64(i) * (window * window) / gaussSteps)
	}
	return t
}

// Draw returns the configuration of a trial with drawn trials drawn before it, given every
// result so far.
func (t *TPE) Draw(drawn int, history []Observation, r *rand.Rand) spec.Config {
	if t.random(drawn, r) {
		return spec.SampleConfig(t.space, r)
	}
	m := t.fit(history)
	if m == nil {
		return spec.SampleConfig(t.space, r)
	}
	return m.propose(t, r)
}

// Fitted is the model a TPE fitted on a history: its draws are Draw's on that history.
type Fitted struct {
	t *TPE
	m *model // nil: too few results, draws are random
	n int    // the observations it was fitted on
}

// Fit fits the model once, for draws that share a history (Fitted.Draw): a driver of 10^5 trials
// cannot refit on every result at every draw.
func (t *TPE) Fit(history []Observation) *Fitted {
	return &Fitted{t: t, m: t.fit(history), n: len(history)}
}

// Observations is how many observations f was fitted on.
func (f *Fitted) Observations() int { return f.n }

// Draw is TPE.Draw on the history f was fitted on: the same configuration from the same r.
func (f *Fitted) Draw(drawn int, r *rand.Rand) spec.Config {
	t := f.t
	if t.random(drawn, r) || f.m == nil {
		return spec.SampleConfig(t.space, r)
	}
	return f.m.propose(t, r)
}

// random says whether the draw after drawn others is a random one: during start-up, and a share
// of the draws after it. It takes one number from r whatever it says.
func (t *TPE) random(drawn int, r *rand.Rand) bool {
	randomFraction := 0.1 // see spec.Sampler
	if t.opt.RandomFraction != nil {
		randomFraction = *t.opt.RandomFraction
	}
	coin := r.Float64()
	return drawn < t.opt.StartupTrials || coin < randomFraction
}

// Refit says whether a model fitted on fitted observations is to be fitted again now that
// there are n: at every new one while it was fitted on fewer than exactRefits (the model of
// every draw is the model of all results, as Draw's), past that once they grew by a refitShare — a model of 10,000 results
// barely moves with the next one, and a refit per draw made a large job quadratic.
func Refit(fitted *Fitted, n int) bool {
	switch {
	case fitted == nil:
		return true
	case fitted.n < exactRefits:
		return n != fitted.n
	default:
		return float64(n-fitted.n) >= refitShare*float64(fitted.n)
	}
}

// exactRefits and refitShare: see Refit.
const (
	exactRefits = 512
	refitShare  = 1.0 / 32
)

// Budget is the budget the model is fitted at, and how many results it has: the largest with
// enough of them (0, 0 when none has). The model pools the trials of the budgets from a third
// of it up (fit).
func (t *TPE) Budget(history []Observation) (budget, n int) {
	counts := map[int]int{}
	for _, o := range history {
		counts[o.Budget]++
	}
	for b, c := range counts {
		if c >= t.needed() && b > budget {
			budget, n = b, c
		}
	}
	return budget, n
}

// needed is how many results a budget needs: min_points good ones and min_points bad ones.
func (t *TPE) needed() int { return 2 * max(t.opt.MinPoints, 1) }

// model is a fitted pair of densities.
type model struct {
	good, bad kde
}

// fit splits the trials into good and bad and fits a density on each. BOHB fits only the
// results at the largest budget with enough of them: under Hyperband, 8 trials of the 49 in a
// round, so the model learns slowly. Here every trial with a result at a budget of at least a
// third of that one (poolShare) is a point, at the largest budget it reached, ranked by its
// loss's quantile among all the results at that budget: a trial stopped early is ranked among
// those it was stopped with, not below every trial that went on (Optuna's order, which
// Hyperband's widest bracket, promoting none, defeats). Smaller budgets stay out: their
// rankings, of learning curves barely begun, favour what learns fast over what ends best.
// Measured with search-bench (docs/search.md), this reached random search's final regret
// sooner on all three objectives and ended nearer the optimum (Hartmann-6: 0.043 against 0.121
// median regret); pooling every budget ended farther on curves (0.011 against 0.0027), and
// Optuna's order farther on all three.
func (t *TPE) fit(history []Observation) *model {
	history = paretoRanked(history)
	budget, n := t.Budget(history)
	if n == 0 {
		return nil
	}
	lowest := int(math.Ceil(float64(budget) * poolShare))
	trials := t.pool(history, lowest)
	n = len(trials)
	if n < t.needed() { // configurations repeated in a discrete space are one trial
		return nil
	}
	nGood := max(t.opt.MinPoints, int(t.opt.TopFraction*float64(n)))
	nGood = min(nGood, n-t.opt.MinPoints)
	points := make([][]float64, n)
	for i, tr := range trials {
		points[i] = tr.point
	}
	return &model{good: t.kde(points[:nGood]), bad: t.kde(points[nGood:])}
}

// poolShare is the smallest budget pooled, as a share of the fitted one: Hyperband's default
// eta, 3, makes it the stage before the fitted one's.
const poolShare = 1.0 / 3

// ranked is a trial as the model sees it: its configuration, encoded, at the largest budget it
// reached, and its loss's quantile among the results at that budget.
type ranked struct {
	point    []float64
	budget   int
	loss     float64
	quantile float64
	first    int // its place in the history: ties' order
}

// pool gives one point per configuration with results at budgets from lowest up, best first:
// by quantile (ties: the larger budget first, then the earlier result). A configuration's
// results are one trial's, however the history orders them.
func (t *TPE) pool(history []Observation, lowest int) []ranked {
	d := len(t.dims)
	index := make(map[string]int, len(history))
	atBudget := map[int][]float64{}
	var trials []ranked
	points := make([]float64, 0, len(history)*d) // one allocation for the uncached points
	for _, o := range history {
		if o.Budget < lowest {
			continue
		}
		atBudget[o.Budget] = append(atBudget[o.Budget], o.Loss)
		e, cached := t.encoded[o.Trial]
		if !cached || o.Trial == "" {
			points = append(points, make([]float64, d)...)
			u := points[len(points)-d : len(points) : len(points)]
			encodeIndexed(u, t.dims, t.names, o.Params)
			key := make([]byte, 0, 8*d)
			for _, x := range u {
				key = binary.LittleEndian.AppendUint64(key, math.Float64bits(x))
			}
			e = encodedTrial{point: u, key: string(key)}
			if o.Trial != "" {
				t.encoded[o.Trial] = e
			}
		}
		i, seen := index[e.key]
		if !seen {
			index[e.key] = len(trials)
			trials = append(trials, ranked{point: e.point, budget: o.Budget, loss: o.Loss, first: len(trials)})
			continue
		}
		if tr := &trials[i]; o.Budget > tr.budget || (o.Budget == tr.budget && o.Loss < tr.loss) {
			tr.budget, tr.loss = o.Budget, o.Loss
		}
	}
	for _, losses := range atBudget {
		slices.Sort(losses)
	}
	for i := range trials {
		tr := &trials[i]
		losses := atBudget[tr.budget]
		below, _ := slices.BinarySearch(losses, tr.loss)
		upTo := below
		for upTo < len(losses) && losses[upTo] == tr.loss {
			upTo++
		}
		tr.quantile = float64(below+upTo) / 2 / float64(len(losses)) // ties share their mid-rank
	}
	slices.SortFunc(trials, func(a, b ranked) int {
		if c := cmp.Compare(a.quantile, b.quantile); c != 0 {
			return c
		}
		if c := cmp.Compare(b.budget, a.budget); c != 0 {
			return c
		}
		return cmp.Compare(a.first, b.first)
	})
	return trials
}

// kde is a kernel density over points (rows of coordinates, NaN inactive), with each
// coordinate's kernel constants worked out once: a draw evaluates it at every candidate.
type kde struct {
	points [][]float64
	bw     []float64 // per coordinate: a Gaussian's standard deviation, or a choice's lambda
	// Per coordinate: 1/bw and the log of the Gaussian's normalisation for a numeric one;
	// log(1-lambda) and log(lambda/(levels-1)) for a choice; and the uniform prior's log density
	// (0 on [0, 1]; log(1/levels) for a choice).
	inv, logNorm, logSame, logDiff, logPrior []float64
	flat                                     []float64 // points, row after row
	logs                                     []float64 // scratch, one per point
	// For the densities by parameter: each numeric coordinate's active values in order (its
	// kernels are summed over a window around the candidate), each choice's points per level.
	sorted [][]float64
	counts [][]float64
	// A numeric coordinate whose window holds many points is summed by its expansion instead
	// (nil moments: by sorted).
	expansions []expansion
}

// window is how many bandwidths from a candidate a point's kernel is summed (beyond, e^-12.5 of
// the nearest: nothing a ranking sees).
const window = 5

func (t *TPE) kde(points [][]float64) kde {
	d := len(t.dims)
	k := kde{points: points, bw: make([]float64, d), inv: make([]float64, d), logNorm: make([]float64, d),
		logSame: make([]float64, d), logDiff: make([]float64, d), logPrior: make([]float64, d),
		flat: make([]float64, 0, d*len(points)), logs: make([]float64, len(points)),
		sorted: make([][]float64, d), counts: make([][]float64, d), expansions: make([]expansion, d)}
	for _, p := range points {
		k.flat = append(k.flat, p...)
	}
	// Scott's and statsmodels' normal reference, as BOHB: n^(-1/(4+d)) for the joint density of
	// the d parameters. The densities by parameter keep BOHB's exponent rather than a density of
	// one's (-1/5): wider kernels, which on search-bench ended nearer the optimum on all three
	// objectives (Hartmann-6: 0.120 against 0.139 median regret).
	dimsModelled := float64(d)
	for j, dm := range t.dims {
		var active []float64
		for _, p := range points {
			if !math.IsNaN(p[j]) {
				active = append(active, p[j])
			}
		}
		n := len(active)
		bw := 1.0
		if n > 1 {
			var sum, sq float64
			for _, x := range active {
				sum += x
				sq += x * x
			}
			mean := sum / float64(n)
			sd := math.Sqrt(max(sq/float64(n)-mean*mean, 0) * float64(n) / float64(n-1))
			bw = 1.06 * sd * math.Pow(float64(n), -1/(4+dimsModelled))
		}
		// Floors: the spec's, and one that shrinks as points accumulate (1/(n+1), Optuna's "magic
		// clip"): a good density of a few nearly equal points would otherwise collapse onto them.
		bw = max(bw, t.opt.MinBandwidth, magicClip/float64(len(points)+1))
		if dm.levels > 0 {
			bw = min(bw, float64(dm.levels-1)/float64(dm.levels)) // lambda: at most uniform
			k.logSame[j] = math.Log1p(-bw)
			k.logDiff[j] = math.Log(bw / float64(max(dm.levels-1, 1)))
			k.logPrior[j] = -math.Log(float64(dm.levels))
			k.counts[j] = make([]float64, dm.levels)
			for _, x := range active {
				k.counts[j][int(x)]++
			}
		} else if expansionPays(len(active), bw, max(t.opt.Candidates, 1)) {
			k.expansions[j] = t.expansion(active, bw)
			k.sorted[j] = active // for its length
		} else {
			slices.Sort(active)
			k.sorted[j] = active
		}
		k.bw[j], k.inv[j], k.logNorm[j] = bw, 1/bw, -math.Log(bw)-0.5*math.Log(2*math.Pi)
	}
	return k
}

// magicClip scales the bandwidth floor that shrinks with the points (see kde).
const magicClip = 1.0

// priorWeight is the weight, as a number of points, of the uniform density mixed into each
// density (Optuna's prior): no region is ever ruled out. With magicClip, it is what keeps the
// search from settling on the first good basin it finds: on Branin, 100 draws of BOHB's bare
// densities ended a median 0.45 above the optimum, with both 0.019 (docs/search.md).
const priorWeight = 1.0

// logDensity is the log of the density at u (coordinates encoded, NaN inactive).
func (t *TPE) logDensity(k *kde, u []float64) float64 {
	if !t.opt.Multivariate {
		return t.logDensityByParameter(k, u)
	}
	d := len(u)
	best, prior := math.Inf(-1), 0.0
	for j, x := range u {
		if x == x {
			prior += k.logPrior[j]
		}
	}
	for i := range k.logs {
		p := k.flat[i*d : i*d+d]
		var s float64
		for j, x := range u {
			y := p[j]
			if x != x || y != y { // NaN: inactive on either side
				continue
			}
			s += t.logKernel(k, j, x, y)
		}
		k.logs[i] = s
		best = max(best, s)
	}
	best = max(best, prior)
	sum := priorWeight * math.Exp(prior-best)
	for _, s := range k.logs {
		sum += math.Exp(s - best)
	}
	return best + math.Log(sum/(float64(len(k.logs))+priorWeight))
}

// logDensityByParameter is the log of the product, over u's active coordinates, of each
// coordinate's own density: its kernels over the points where it is active, and the prior.
func (t *TPE) logDensityByParameter(k *kde, u []float64) float64 {
	var total float64
	for j, x := range u {
		if x != x { // NaN: inactive
			continue
		}
		var sum, n float64 // kernel densities, and the points they are of
		if counts := k.counts[j]; counts != nil {
			for _, c := range counts {
				n += c
			}
			same := counts[int(x)]
			sum = same*math.Exp(k.logSame[j]) + (n-same)*math.Exp(k.logDiff[j])
		} else if e := &k.expansions[j]; e.moments != nil {
			n = float64(len(k.sorted[j]))
			sum = e.sum(x) * math.Exp(k.logNorm[j])
		} else {
			vals := k.sorted[j]
			n = float64(len(vals))
			from, _ := slices.BinarySearch(vals, x-window*k.bw[j])
			inv := k.inv[j]
			for _, y := range vals[from:] {
				if y > x+window*k.bw[j] {
					break
				}
				z := (x - y) * inv
				sum += t.gauss(z * z)
			}
			sum *= math.Exp(k.logNorm[j])
		}
		total += math.Log((sum + priorWeight*math.Exp(k.logPrior[j])) / (n + priorWeight))
	}
	return total
}

// logKernel is coordinate j's log kernel between x and a point's y.
func (t *TPE) logKernel(k *kde, j int, x, y float64) float64 {
	if t.dims[j].levels > 0 {
		if x == y {
			return k.logSame[j]
		}
		return k.logDiff[j]
	}
	z := (x - y) * k.inv[j]
	return k.logNorm[j] - 0.5*z*z
}

// propose draws the candidates from the widened good density and returns the best by l/g.
func (m *model) propose(t *TPE, r *rand.Rand) spec.Config {
	var best spec.Config
	bestScore := math.Inf(-1)
	u := make([]float64, len(t.dims))
	for range max(t.opt.Candidates, 1) {
		p := m.good.points[r.IntN(len(m.good.points))]
		for j, d := range t.dims {
			if !t.opt.Multivariate { // each parameter from its own density: a point of its own
				p = m.good.points[r.IntN(len(m.good.points))]
			}
			switch {
			case math.IsNaN(p[j]): // inactive in the chosen point: any value
				u[j] = r.Float64()
			case d.levels > 0:
				idx := int(p[j])
				if r.Float64() >= 1-m.good.bw[j] {
					idx = r.IntN(d.levels)
				}
				u[j] = (float64(idx) + 0.5) / float64(d.levels)
			default:
				u[j] = truncNormal(r, p[j], m.good.bw[j]*t.opt.BandwidthFactor)
			}
		}
		c := decode(t.dims, t.space, u)
		v := encode(t.dims, c) // inactive coordinates NaN, choices as indices
		score := t.logDensity(&m.good, v) - t.logDensity(&m.bad, v)
		if best == nil || score > bestScore {
			best, bestScore = c, score
		}
	}
	return best
}

// truncNormal draws from N(mean, sd) restricted to [0, 1].
func truncNormal(r *rand.Rand, mean, sd float64) float64 {
	for range 100 {
		x := mean + sd*r.NormFloat64()
		if x >= 0 && x <= 1 {
			return x
		}
	}
	return min(max(mean, 0), 1)
}

// paretoRanked is history with each result of several objectives or constraints ranked by
// dominance: its Loss becomes its place among the results at its budget in pareto.Order
// (feasible first, then non-dominated front, then crowding), so that the split of good and bad
// below is MOTPE's by non-domination (Ozaki et al., 2020 and 2022, who break the last front's
// ties by hypervolume contribution where this takes crowding, as promotion does) with Optuna's
// feasible-first for constraints; the rest of TPE ranks by Loss, unchanged. A history of one
// objective without constraints is returned as it is.
func paretoRanked(history []Observation) []Observation {
	if !slices.ContainsFunc(history, func(o Observation) bool { return len(o.Losses) > 1 || o.Violation != 0 }) {
		return history
	}
	byBudget := map[int][]int{}
	for i, o := range history {
		byBudget[o.Budget] = append(byBudget[o.Budget], i)
	}
	out := slices.Clone(history)
	for _, at := range byBudget {
		points := make([]pareto.Point, len(at))
		for k, i := range at {
			o := history[i]
			points[k] = pareto.Point{Losses: o.Losses, Violation: o.Violation}
			if len(o.Losses) == 0 {
				points[k].Losses = []float64{o.Loss}
			}
		}
		for place, k := range pareto.Order(points) {
			out[at[k]].Loss = float64(place)
		}
	}
	return out
}
