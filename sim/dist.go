package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rubberband-hpo/rubberband/spec"
)

// Dist is a latency distribution in seconds. Sample never returns a negative number.
type Dist interface {
	Sample(r *rand.Rand) float64
	Mean() float64
	Var() float64
}

// NewDist builds a distribution from its validated spec.
func NewDist(d spec.Dist) (Dist, error) {
	switch d.Kind {
	case spec.DistConstant, "":
		return Constant(d.Value), nil
	case spec.DistNormal:
		return NewTruncNormal(float64(d.Mean), float64(d.Std)), nil
	case spec.DistLogNormal:
		return NewLogNormal(float64(d.Mean), float64(d.Std)), nil
	case spec.DistUniform:
		return Uniform{Lo: float64(d.Min), Hi: float64(d.Max)}, nil
	case spec.DistEmpirical:
		if len(d.Samples) == 0 {
			return nil, fmt.Errorf("empirical distribution has no samples")
		}
		e := Empirical{Values: make([]float64, len(d.Samples))}
		for i, s := range d.Samples {
			e.Values[i] = float64(s)
		}
		return e, nil
	default:
		return nil, fmt.Errorf("unknown distribution %q", d.Kind)
	}
}

// Constant always takes the same time.
type Constant float64

func (c Constant) Sample(*rand.Rand) float64 { return float64(c) }
func (c Constant) Mean() float64             { return float64(c) }
func (c Constant) Var() float64              { return 0 }

// TruncNormal is a normal distribution conditioned on being at least 0.
type TruncNormal struct {
	Mu, Sigma float64
	mean, vr  float64
}

// NewTruncNormal returns N(mu, sigma) truncated at 0, with its moments precomputed.
func NewTruncNormal(mu, sigma float64) TruncNormal {
	t := TruncNormal{Mu: mu, Sigma: sigma, mean: math.Max(mu, 0)}
	if sigma <= 0 {
		return t
	}
	// Moments of a normal truncated below at 0: alpha = -mu/sigma, lambda = phi(alpha)/(1-Phi(alpha)).
	alpha := -mu / sigma
	z := 0.5 * math.Erfc(alpha/math.Sqrt2) // 1 - Phi(alpha)
	lambda := math.Exp(-alpha*alpha/2) / math.Sqrt(2*math.Pi) / z
	t.mean = mu + sigma*lambda
	t.vr = sigma * sigma * (1 + alpha*lambda - lambda*lambda)
	return t
}

func (t TruncNormal) Sample(r *rand.Rand) float64 {
	if t.Sigma <= 0 {
		return math.Max(t.Mu, 0)
	}
	for { // accepts with probability 1-Phi(-mu/sigma) >= 1/2, since validation keeps mu >= 0
		if x := t.Mu + t.Sigma*r.NormFloat64(); x >= 0 {
			return x
		}
	}
}
func (t TruncNormal) Mean() float64 { return t.mean }
func (t TruncNormal) Var() float64  { return t.vr }

// LogNormal is parameterised by the mean and standard deviation of the latency itself.
type LogNormal struct{ M, S, mu, sigma float64 }

// NewLogNormal returns the lognormal distribution with mean m and standard deviation s.
func NewLogNormal(m, s float64) LogNormal {
	l := LogNormal{M: m, S: s}
	if m > 0 {
		l.sigma = math.Sqrt(math.Log1p(s * s / (m * m)))
		l.mu = math.Log(m) - l.sigma*l.sigma/2
	}
	return l
}

func (l LogNormal) Sample(r *rand.Rand) float64 {
	if l.M <= 0 || l.S <= 0 {
		return math.Max(l.M, 0)
	}
	return math.Exp(l.mu + l.sigma*r.NormFloat64())
}
func (l LogNormal) Mean() float64 { return l.M }
func (l LogNormal) Var() float64  { return l.S * l.S }

// Uniform is uniform on [Lo, Hi].
type Uniform struct{ Lo, Hi float64 }

func (u Uniform) Sample(r *rand.Rand) float64 { return u.Lo + r.Float64()*(u.Hi-u.Lo) }
func (u Uniform) Mean() float64               { return (u.Lo + u.Hi) / 2 }
func (u Uniform) Var() float64                { return (u.Hi - u.Lo) * (u.Hi - u.Lo) / 12 }

// Empirical draws one of the measured values, each equally likely.
type Empirical struct{ Values []float64 }

func (e Empirical) Sample(r *rand.Rand) float64 { return e.Values[r.IntN(len(e.Values))] }
func (e Empirical) Mean() float64 {
	s := 0.0
	for _, v := range e.Values {
		s += v
	}
	return s / float64(len(e.Values))
}
func (e Empirical) Var() float64 {
	m, s := e.Mean(), 0.0
	for _, v := range e.Values {
		s += (v - m) * (v - m)
	}
	return s / float64(len(e.Values))
}

// Scaled is a distribution stretched by a factor: an interpolated iteration latency.
type Scaled struct {
	Base   Dist
	Factor float64
}

func (s Scaled) Sample(r *rand.Rand) float64 { return s.Factor * s.Base.Sample(r) }
func (s Scaled) Mean() float64               { return s.Factor * s.Base.Mean() }
func (s Scaled) Var() float64                { return s.Factor * s.Factor * s.Base.Var() }

// cltIters is the iteration count from which a sum of iteration latencies is drawn at once from
// the normal its central limit gives, instead of iteration by iteration. Below it every
// iteration is its own draw, so that short stages keep the distribution's exact shape.
const cltIters = 32

// SampleSum draws the total latency of n independent iterations.
func SampleSum(d Dist, n int, r *rand.Rand) float64 {
	if n <= 0 {
		return 0
	}
	if v := d.Var(); v == 0 {
		return float64(n) * d.Mean()
	} else if n >= cltIters {
		return math.Max(0, float64(n)*d.Mean()+math.Sqrt(float64(n)*v)*r.NormFloat64())
	}
	s := 0.0
	for range n {
		s += d.Sample(r)
	}
	return s
}
