package sim

import (
	"math"
	"math/rand/v2"

	"github.com/rubberband-hpo/rubberband/spec"
)

// A stage's TRAIN nodes run as chains, one per slot: slot j trains trials j, j+slots, … one
// after another (addTrain), and the stage ends with its slowest chain. Where every chain sums
// enough independent draws for the central limit to hold — as SampleSum already takes it for a
// trial of cltIters iterations or more — a chain is normal, and the slowest of k normal chains
// is drawn at once from its order statistic: the inverse CDF at U^(1/k). A stage of 32,768
// trials then costs two draws a sample instead of 32,768 trials' iterations, and the planner,
// which draws each stage afresh for every allocation it tries, plans jobs of any size.

// chainNormal is the normal a chain of m trials of stage st on offer o, gpt GPUs each, sums to,
// and whether it is one: each part (the iterations of all m trials; the m launches, each a
// start-up and the run path's overhead) is a sum of normal draws, or of cltIters draws or more
// (the central limit, as SampleSum takes it).
func chainNormal(o *Offer, st spec.Stage, gpt, m int) (mean, sd float64, ok bool) {
	it := o.IterLatency(gpt)
	upMean, upVar := o.Launch()
	iters := m * st.Iters
	ok = (normal(it) || iters >= cltIters) && ((normal(o.Startup) && normal(o.Overhead)) || m >= cltIters)
	mean = float64(m)*upMean + float64(iters)*it.Mean()
	sd = math.Sqrt(float64(m)*upVar + float64(iters)*it.Var())
	return mean, sd, ok
}

// waveChains says how a stage's trials fall into chains at an allocation: long chains of m+1
// trials and short ones of m (long may be 0).
func waveChains(st spec.Stage, a StageAlloc) (m, long, short int) {
	slots := min(a.GPUs, st.Trials)
	m = st.Trials / slots
	long = st.Trials % slots
	return m, long, slots - long
}

// stageByChains is a stage's draw of its slowest chain, when its chains are normal: a function
// of two uniform draws' logs (one for the short chains' maximum, one for the long chains')
// giving one sample's TRAIN-to-SYNC time. ok is false when some chain is too short for the
// central limit (the stage is drawn trial by trial).
func stageByChains(o *Offer, st spec.Stage, a StageAlloc) (draw func(logShort, logLong float64) float64, ok bool) {
	m, long, short := waveChains(st, a)
	gpt := GPUsPerTrial(st, a)
	mean, sd, ok := chainNormal(o, st, gpt, m)
	if !ok {
		return nil, false
	}
	meanLong, sdLong, _ := chainNormal(o, st, gpt, m+1) // longer: the limit holds too
	// The chains' first trials launch at once and queue (Offer.Contention): chain j starts j
	// contentions late. The slowest chain is drawn as if every chain started as late as the
	// last: an upper bound, by at most (chains-1) contentions, and exact without contention.
	queued := o.Contention.At(gpt) * float64(long+short-1)
	return func(logShort, logLong float64) float64 {
		end := maxOfNormals(logShort, mean, sd, short)
		if long > 0 {
			end = max(end, maxOfNormals(logLong, meanLong, sdLong, long))
		}
		return end + queued
	}, true
}

// maxOfNormals is the largest of k independent draws of N(mean, sd), at least 0 as
// SampleSum's, at a uniform draw U given as its log: mean + sd Φ⁻¹(U^(1/k)).
func maxOfNormals(logU, mean, sd float64, k int) float64 {
	return max(0, mean+sd*math.Sqrt2*math.Erfcinv(2*topShareAt(logU, k)))
}

// maxOf draws the largest of k independent draws of d at once, from its order statistic (the
// quantile at U^(1/k)), where d's quantile function is known: a scale-up's slowest new node.
// ok is false for a distribution it does not know (knowsMax; an empirical one): draw them one
// by one.
func maxOf(d Dist, k int, r *rand.Rand) (v float64, ok bool) {
	switch d := d.(type) {
	case Constant:
		return float64(d), true
	case TruncNormal: // N(mu, sigma) given X >= 0 (Sample rejects below 0): its quantile
		if d.Sigma <= 0 {
			return max(d.Mu, 0), true
		}
		kept := 0.5 * math.Erfc(-d.Mu/d.Sigma/math.Sqrt2) // P(X >= 0)
		return max(0, d.Mu+d.Sigma*math.Sqrt2*math.Erfcinv(2*topShare(r, k)*kept)), true
	case LogNormal:
		if d.M <= 0 || d.S <= 0 {
			return max(d.M, 0), true
		}
		return math.Exp(d.mu + d.sigma*normalMaxQuantile(r, k)), true
	case Uniform:
		return d.Hi - (d.Hi-d.Lo)*topShare(r, k), true
	case Scaled:
		v, ok := maxOf(d.Base, k, r)
		return d.Factor * v, ok
	}
	return 0, false
}

// knowsMax says whether maxOf draws d's maximum at once.
func knowsMax(d Dist) bool {
	switch d := d.(type) {
	case Constant, TruncNormal, LogNormal, Uniform:
		return true
	case Scaled:
		return knowsMax(d.Base)
	}
	return false
}

// normalMaxQuantile draws the largest of k standard normal draws: Φ⁻¹(U^(1/k)).
func normalMaxQuantile(r *rand.Rand, k int) float64 {
	return math.Sqrt2 * math.Erfcinv(2*topShare(r, k))
}

// topShare draws the share of a distribution above the largest of k draws from it: 1 - U^(1/k).
func topShare(r *rand.Rand, k int) float64 { return topShareAt(logUniform(r), k) }

// topShareAt is 1 - U^(1/k) for U given as its log, worked out as -expm1(log(U)/k) so that it
// keeps its digits when k is large.
func topShareAt(logU float64, k int) float64 {
	return max(-math.Expm1(logU/float64(k)), 1e-300)
}

// logUniform draws the log of a uniform draw in (0, 1].
func logUniform(r *rand.Rand) float64 { return math.Log(1 - r.Float64()) }

// DrawnTrials counts the trial-stages a prediction draws trial by trial, each stage's trials
// summed, at worst (a trial a slot): those of the stages that some offer cannot draw by chains
// (trainByChains).
func (s *Simulator) DrawnTrials() int {
	n := 0
	for _, br := range s.brackets {
		for _, st := range br.Stages {
			if !s.byChainsAlways(st) {
				n += st.Trials
			}
		}
	}
	return n
}

// byChainsAlways says whether every offer draws stage st by chains at any allocation: chains of
// one trial on the most GPUs a trial may have are normal (longer ones, or fewer GPUs a trial,
// only sum more normal draws).
func (s *Simulator) byChainsAlways(st spec.Stage) bool {
	if s.m.PerFunction || s.trialByTrial {
		return false
	}
	for _, o := range s.m.Offers {
		if o.Spot != nil || o.slows() {
			return false
		}
		for _, g := range o.points {
			if _, _, ok := chainNormal(o, st, g, 1); !ok {
				return false
			}
		}
	}
	return true
}

// normal says whether d's draws are normal, so that a sum of them is too: a constant, or a
// normal whose truncation at 0 is below 5 standard deviations (a share under 3e-7 cut), scaled
// or not.
func normal(d Dist) bool {
	switch d := d.(type) {
	case Constant:
		return true
	case TruncNormal:
		return d.Sigma <= 0 || d.Mu >= 5*d.Sigma
	case Scaled:
		return d.Factor > 0 && normal(d.Base)
	}
	return false
}
