package ui

import (
	"math"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/spec"
)

// pageFold is what the run page draws of a run's journal besides its state, folded event by
// event as the hub reads it: a 100,000-trial run's page keeps its curves, search results, trial
// IDs and a few cost readings, not its million events, and an update folds only what was
// appended.
type pageFold struct {
	events      int       // how many were folded
	startsRun   bool      // the first is the run's start
	first, last time.Time // their times
	curves      *rundir.CurveFold
	search      *rundir.SearchFold
	trials      map[string]bool // the IDs the journal declares (trial logs)
	// moments are the realized cost at each stage's start and sync and each node's coming up
	// and release: the cost chart's points. moments[billed:] are not billed yet: no later event
	// was folded, and the state at them is the fold's now.
	moments []costPoint
	billed  int
}

type costPoint struct {
	at   time.Time
	cost float64
	ok   bool // the run had started
}

func newPageFold(exp *spec.Experiment) *pageFold {
	return &pageFold{curves: rundir.NewCurveFold(exp), search: rundir.NewSearchFold(exp), trials: map[string]bool{}}
}

// apply folds e into the page and into f, the run's state (nil when it could not be made).
func (p *pageFold) apply(f *rundir.Fold, e journal.Event) {
	// A moment is billed as the journal stood up to it: with every event at its time folded,
	// none after (a replay up to each moment, without the replays).
	for p.billed < len(p.moments) && e.At.After(p.moments[p.billed].at) {
		p.bill(f, p.billed)
		p.billed++
	}
	if f != nil {
		f.Apply(e)
	}
	if p.events == 0 {
		p.startsRun, p.first = e.Ev == journal.EvStart, e.At
	}
	p.events++
	p.last = e.At
	p.curves.Apply(e)
	p.search.Apply(e)
	switch e.Ev {
	case journal.EvTrial:
		p.trials[e.Trial] = true
	case journal.EvStage, journal.EvSync, journal.EvNodeUp, journal.EvNodeOff:
		p.moments = append(p.moments, costPoint{at: e.At})
	}
}

func (p *pageFold) bill(f *rundir.Fold, i int) {
	if f != nil {
		p.moments[i].cost, p.moments[i].ok = f.Spent(p.moments[i].at)
	}
}

// start is the run's start, when the journal begins with it (zero otherwise).
func (p *pageFold) start() time.Time {
	if p.startsRun {
		return p.first
	}
	return time.Time{}
}

// realized is the realized cost at up to 30 moments, now the last (the caller puts the run's
// own figure there); none unless the journal begins with the run's start.
func (p *pageFold) realized(f *rundir.Fold, now time.Time) []costPoint {
	if !p.startsRun {
		return nil
	}
	for i := p.billed; i < len(p.moments); i++ { // the fold holds every event up to them
		p.bill(f, i)
	}
	at := append(p.moments[:len(p.moments):len(p.moments)], costPoint{at: now})
	if f != nil {
		at[len(at)-1].cost, at[len(at)-1].ok = f.Spent(now)
	}
	if len(at) <= 30 {
		return at
	}
	step := float64(len(at)-1) / 29
	keep := make([]costPoint, 0, 30)
	for i := 0; i < 30; i++ {
		keep = append(keep, at[int(math.Round(float64(i)*step))])
	}
	return keep
}
