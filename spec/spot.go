package spec

import (
	"fmt"
	"time"
)

// Spot is the spot market of the cluster's instance type: what it costs, how often instances
// are taken back, and what happens when no spot capacity is left. It is read whether or not
// market is spot, so that a planner can weigh both markets.
type Spot struct {
	// PricePerHour is the spot price per node-hour; cluster.spot_price_per_hour is the same
	// value under its older name. After defaulting both hold it, whichever was given.
	PricePerHour float64 `yaml:"price_per_hour"`
	// Discount is the fraction off the on-demand price (0.7: spot costs 30% of on-demand); it
	// sets the spot price instead of giving one.
	Discount float64 `yaml:"discount"`
	// InterruptionsPerHour is the rate at which one node is interrupted (a Poisson process).
	InterruptionsPerHour float64 `yaml:"interruptions_per_hour"`
	// Lifetimes is the distribution of a spot instance's lifetime, instead of a rate; nil when
	// not given.
	Lifetimes *Dist `yaml:"lifetimes"`
	// Notice is the warning an interrupted instance gets (default 2m, EC2's).
	Notice Duration `yaml:"notice"`
	// Fallback is what to rent when no spot capacity is left: FallbackOnDemand (the default)
	// or FallbackNone.
	Fallback string `yaml:"fallback"`
	// OnNotice is what an interrupted trial keeps: OnNoticeCheckpoint (the default: the trainer
	// checkpoints within the notice, as rubberband's trainer contract asks, and loses nothing)
	// or OnNoticeRestart (the launch's work is lost: it restarts from the checkpoint it began
	// from).
	OnNotice string `yaml:"on_notice"`
}

// What an interrupted trial keeps.
const (
	OnNoticeCheckpoint = "checkpoint"
	OnNoticeRestart    = "restart"
)

// Spot fallbacks.
const (
	// FallbackOnDemand rents on-demand instances when spot capacity runs out.
	FallbackOnDemand = "on-demand"
	// FallbackNone waits for spot capacity instead.
	FallbackNone = "none"
)

// Spot limits and defaults.
const (
	// DefaultSpotNotice is EC2's interruption notice.
	DefaultSpotNotice = Duration(2 * time.Minute)
	// MaxSpotNotice bounds the notice: past an hour it is not a notice any provider gives.
	MaxSpotNotice = Duration(time.Hour)
	// MaxInterruptionsPerHour is one interruption a minute per node: a node could not start in
	// that time.
	MaxInterruptionsPerHour = 60
)

// Field paths of the spot price's spellings.
const (
	pathSpotPrice    = "cluster.spot_price_per_hour"
	pathSpotPriceNew = "cluster.spot.price_per_hour"
	pathDiscount     = "cluster.spot.discount"
	pathRate         = "cluster.spot.interruptions_per_hour"
	pathLifetimes    = "cluster.spot.lifetimes"
)

// spotDefaults applies the spot block's defaults and makes its two spellings of the spot price
// agree; it runs after the catalog filled the prices. It returns the problems of fields given
// together that exclude each other, and marks them unknown, as a key given twice is.
func (e *Experiment) spotDefaults() Problems {
	var probs Problems
	c, s := &e.Cluster, &e.Cluster.Spot
	conflict := func(path, other, msg string) {
		probs = append(probs, Problem{File: e.File, Line: e.Line(path), Path: path,
			Msg: fmt.Sprintf("%s (%s is on line %d)", msg, other, e.Line(other))})
		e.markFailed(path)
		e.markFailed(other)
	}
	switch {
	case e.Has(pathSpotPrice) && e.Has(pathSpotPriceNew):
		conflict(pathSpotPriceNew, pathSpotPrice, "is the same price as spot_price_per_hour: give one of the two")
	case e.Has(pathDiscount) && (e.Has(pathSpotPrice) || e.Has(pathSpotPriceNew)):
		other := pathSpotPrice
		if e.Has(pathSpotPriceNew) {
			other = pathSpotPriceNew
		}
		conflict(pathDiscount, other, "sets the spot price from the on-demand price: give a spot price or a discount, not both")
	}
	if e.Has(pathRate) && e.Has(pathLifetimes) {
		conflict(pathLifetimes, pathRate, "give interruptions_per_hour or lifetimes, not both")
	}

	switch {
	case e.unknown(pathSpotPriceNew) || e.unknown(pathDiscount):
		// A spot price that depends on a value in doubt is in doubt too.
		e.markFailed(pathSpotPrice)
	case e.Has(pathSpotPriceNew):
		c.SpotPricePerHour = s.PricePerHour
	case e.Has(pathDiscount):
		if s.Discount > 0 && s.Discount < 1 && c.PricePerHour > 0 && c.PricePerHour <= MaxPricePerHour && !e.unknown("cluster.price_per_hour") {
			c.SpotPricePerHour = c.PricePerHour * (1 - s.Discount)
		} else { // the discount's or the price's own problem says it all
			e.markFailed(pathSpotPrice)
		}
	}
	s.PricePerHour = c.SpotPricePerHour

	if !e.Has("cluster.spot.notice") {
		s.Notice = DefaultSpotNotice
	}
	if s.Fallback == "" && !e.unknown("cluster.spot.fallback") {
		s.Fallback = FallbackOnDemand
	}
	if s.OnNotice == "" && !e.unknown("cluster.spot.on_notice") {
		s.OnNotice = OnNoticeCheckpoint
	}
	if s.Lifetimes != nil {
		s.Lifetimes.inferKind()
	}
	return probs
}

// spotPricePath is the path the spot price was written at, where problems about it belong.
func (e *Experiment) spotPricePath() string {
	if e.Has(pathSpotPriceNew) {
		return pathSpotPriceNew
	}
	return pathSpotPrice
}

func (v *validator) spot() {
	c, s := v.e.Cluster, v.e.Cluster.Spot
	if c.SpotPricePerHour < 0 || c.SpotPricePerHour > MaxPricePerHour {
		v.add(v.e.spotPricePath(), "%v is out of range (0 to %d dollars an hour)", c.SpotPricePerHour, MaxPricePerHour)
	} else if c.Market == MarketSpot && c.SpotPricePerHour == 0 && len(c.InstanceTypes) == 0 { // else each candidate's
		why := "set instance_type to one the catalog has a spot price for"
		if c.InstanceType != "" {
			why = fmt.Sprintf("the catalog has none for %q", c.InstanceType)
		}
		v.add(v.e.spotPricePath(), "market spot needs a spot price: give spot.price_per_hour or spot.discount (%s)", why)
	}
	if v.e.Has(pathDiscount) && !(s.Discount > 0 && s.Discount < 1) {
		v.add(pathDiscount, "%v is out of range (above 0, below 1: the fraction off the on-demand price, 0.7 for 70%% off)", s.Discount)
	}
	if s.InterruptionsPerHour < 0 || s.InterruptionsPerHour > MaxInterruptionsPerHour {
		v.add(pathRate, "%v is out of range (0 to %d interruptions per node-hour)", s.InterruptionsPerHour, MaxInterruptionsPerHour)
	}
	if s.Lifetimes != nil {
		before := len(v.probs)
		v.dist(pathLifetimes, *s.Lifetimes)
		if len(v.probs) == before && !v.e.unknown(pathLifetimes) && !(distMean(*s.Lifetimes) > 0) {
			v.add(pathLifetimes, "an instance must live some time (a mean lifetime above 0)")
		}
	}
	if s.Notice < 0 || s.Notice > MaxSpotNotice {
		v.add("cluster.spot.notice", "%s is out of range (0 to %s)", s.Notice.D(), MaxSpotNotice.D())
	}
	switch s.Fallback {
	case FallbackOnDemand, FallbackNone:
	default:
		v.add("cluster.spot.fallback", "%q is not a fallback (%s or %s)", s.Fallback, FallbackOnDemand, FallbackNone)
	}
	switch s.OnNotice {
	case OnNoticeCheckpoint, OnNoticeRestart:
	default:
		v.add("cluster.spot.on_notice", "%q is not what a notice does (%s or %s)", s.OnNotice, OnNoticeCheckpoint, OnNoticeRestart)
	}
}

// distMean is a distribution's mean, for the checks that need one; it is not the simulator's.
func distMean(d Dist) float64 {
	switch d.Kind {
	case DistConstant:
		return float64(d.Value)
	case DistNormal, DistLogNormal:
		return float64(d.Mean)
	case DistUniform:
		return float64(d.Min+d.Max) / 2
	case DistEmpirical:
		if len(d.Samples) == 0 {
			return 0
		}
		sum := 0.0
		for _, x := range d.Samples {
			sum += float64(x)
		}
		return sum / float64(len(d.Samples))
	}
	return 0
}
