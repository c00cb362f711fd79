package sim

import (
	"cmp"
	"maps"
	"slices"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Observed is a sum of observations and how many there were (weights may be fractional: older
// evidence counts less).
type Observed struct {
	Sum, N float64
}

// Mean is the observations' mean, or 0 without any.
func (o Observed) Mean() float64 {
	if o.N <= 0 {
		return 0
	}
	return o.Sum / o.N
}

// Add adds n observations summing to sum, each counting weight.
func (o *Observed) Add(sum, n, weight float64) {
	o.Sum += weight * sum
	o.N += weight * n
}

// Evidence is what a run has observed of its model, in spec seconds: iteration latencies per
// offer (Model.OfferIndex) and GPU count of a trial, and gang start-ups (launch to first
// iteration) per offer: those of the first wave of a job's first stage apart (FirstWave), since
// they carry the first-stage lag as well, which a later launch does not pay.
type Evidence struct {
	Iter      map[IterKey]Observed
	Startup   map[int]Observed
	FirstWave map[int]Observed
	// Interruptions are, per spot offer, the nodes the market took (Sum) over the node-seconds
	// the run held there (N): what moves the offer's interruption rate.
	Interruptions map[int]Observed
}

// IterKey is where iterations were observed: on trials of GPUs GPUs on offer Offer.
type IterKey struct{ Offer, GPUs int }

// Prior weights: the profile counts as this many observations of its own means. Five
// iterations and two start-ups: a stage's worth of evidence outweighs the profile, one noisy
// iteration does not.
const (
	priorIters    = 5
	priorStartups = 2
)

// The spot market's prior (a Gamma prior on its interruption rate): the spec's rate counts as
// the exposure in which it expects priorInterruptions interruptions, at most
// maxPriorExposure node-seconds (two node-hours, what 24 nodes see in five minutes: a market
// said to be calm, or never interrupted, learns from what a run's first stage sees).
const (
	priorInterruptions = 2
	maxPriorExposure   = 2 * 3600
)

// Posterior is the model moved by the evidence: each offer's measured GPU count's mean iteration
// latency becomes the weighted mean of the profile's (as priorIters observations) and the
// observed ones; what was not observed moves by the observed ones' mean factor, since what slows
// one count or type (a slower dataset, a profile that was wrong) slows the others alike. Start-ups
// move the same way, additively where the profile's is 0. A spot offer's interruption rate
// moves to the rate its nodes were interrupted at (Spot.moved; lifetimes do not). The first wave's start-ups move
// neither: what they take beyond the posterior's start-up is the first-stage lag's evidence, and
// it moves the lag alone (as priorStartups observations of the profile's), so that a job slow to
// get going is not read as a slower trainer. Shapes (the spread relative to the mean) stay the
// profile's. The receiver is not changed.
func (m *Model) Posterior(ev Evidence) *Model {
	// Each observed (offer, count)'s factor, and their mean weighted by observations: what the
	// unobserved ones move by.
	iterFactor := map[IterKey]float64{}
	sum, weight := 0.0, 0.0
	// Summed in a fixed order, so that the same evidence always gives the same bits.
	iterKeys := slices.SortedFunc(maps.Keys(ev.Iter), func(a, b IterKey) int {
		return cmp.Or(cmp.Compare(a.Offer, b.Offer), cmp.Compare(a.GPUs, b.GPUs))
	})
	for _, k := range iterKeys {
		o := ev.Iter[k]
		if k.Offer < 0 || k.Offer >= len(m.Offers) || o.N <= 0 {
			continue
		}
		f := factor(m.Offers[k.Offer].IterLatency(k.GPUs).Mean(), o, priorIters)
		iterFactor[k] = f
		sum, weight = sum+o.N*f, weight+o.N
	}
	iterCommon := 1.0
	if weight > 0 {
		iterCommon = sum / weight
	}
	sum, weight = 0, 0
	for _, i := range slices.Sorted(maps.Keys(ev.Startup)) {
		o := ev.Startup[i]
		if i >= 0 && i < len(m.Offers) && o.N > 0 && m.Offers[i].Startup.Mean() > 0 {
			sum, weight = sum+o.N*factor(m.Offers[i].Startup.Mean(), o, priorStartups), weight+o.N
		}
	}
	startCommon := 1.0
	if weight > 0 {
		startCommon = sum / weight
	}
	post := *m
	post.Offers = make([]*Offer, len(m.Offers))
	for i, o := range m.Offers {
		c := *o
		c.iter = make(map[int]Dist, len(o.iter))
		for _, g := range o.points {
			f, ok := iterFactor[IterKey{i, g}]
			if !ok {
				f = iterCommon
			}
			c.iter[g] = scaled(o.iter[g], f)
		}
		c.Startup = scaled(o.Startup, startCommon)
		if obs := ev.Startup[i]; obs.N > 0 {
			c.Startup = moved(o.Startup, obs, priorStartups)
		}
		if obs := ev.FirstWave[i]; obs.N > 0 {
			excess := Observed{Sum: max(0, obs.Sum-obs.N*c.Startup.Mean()), N: obs.N}
			c.FirstLag = moved(o.FirstLag, excess, priorStartups)
		}
		if obs := ev.Interruptions[i]; obs.N > 0 && o.Market == spec.MarketSpot {
			prior := o.Spot
			if prior == nil { // the spec names no interruptions: a rate of 0 until some are seen
				prior = &Spot{Restart: o.restart, Notice: o.notice}
			}
			if c.Spot = prior.moved(obs); c.Spot.Rate == 0 && c.Spot.Lifetimes == nil {
				c.Spot = o.Spot
			}
		}
		post.Offers[i] = &c
	}
	post.Offer = post.Offers[0]
	return &post
}

// factor is how far evidence o moves a mean mu held as n0 observations: the weighted mean of
// the two, over mu (1 with no evidence, or no mean to scale).
func factor(mu float64, o Observed, n0 float64) float64 {
	if o.N <= 0 || mu <= 0 {
		return 1
	}
	return (n0*mu + o.Sum) / (n0 + o.N) / mu
}

// moved is d moved by evidence o, d counting as n0 observations of its mean: scaled, or, where
// d is 0 (a profile without it), the evidence's own mean so weighed, as a constant.
func moved(d Dist, o Observed, n0 float64) Dist {
	if mu := d.Mean(); mu > 0 {
		return scaled(d, factor(mu, o, n0))
	}
	return Constant(o.Sum / (n0 + o.N))
}

// IterFactor is how much slower (above 1) or faster the model's iterations at g GPUs are than
// base's.
func (m *Model) IterFactor(base *Model, g int) float64 {
	b := base.IterLatency(g).Mean()
	if b <= 0 {
		return 1
	}
	return m.IterLatency(g).Mean() / b
}

func scaled(d Dist, f float64) Dist {
	if f == 1 {
		return d
	}
	return Scaled{Base: d, Factor: f}
}

// moved is the market after obs (interruptions over node-seconds): its rate the posterior mean
// of a Gamma prior whose mean is the spec's rate, worth priorInterruptions of them (at most
// maxPriorExposure node-seconds). Lifetimes stay as they are: drawn afresh at each node's start,
// they are no rate, and nodes held shorter than a lifetime see no interruption by design (their
// silence is no evidence of a calmer market).
func (sp *Spot) moved(obs Observed) *Spot {
	if sp.Lifetimes != nil {
		return sp
	}
	exposure := float64(maxPriorExposure)
	if sp.Rate > 0 {
		exposure = min(exposure, priorInterruptions/sp.Rate)
	}
	c := *sp
	c.Rate = (sp.Rate*exposure + obs.Sum) / (exposure + obs.N)
	return &c
}
