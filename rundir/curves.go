package rundir

import (
	"sort"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Curve is one trial's learning curve: the objective at each reported iteration, and the points
// (indices into X and Y) where a sync promoted the trial.
type Curve struct {
	Trial string
	X, Y  []float64
	Marks []int
}

// LearningCurves are the objective's values every trial reported, in the order the trials first
// reported, with each promotion marked at the last point at or before the end of the stage it
// was promoted from.
func LearningCurves(exp *spec.Experiment, events []journal.Event) []Curve {
	f := NewCurveFold(exp)
	for _, e := range events {
		f.Apply(e)
	}
	return f.Curves()
}

// CurveFold keeps a run's learning curves as its journal is read, one event at a time: a reader
// that follows the journal (the dashboard) keeps the points its charts draw, not the events.
type CurveFold struct {
	metric   string
	brackets []spec.Bracket
	curves   []Curve // in the order the trials first reported, each sorted by iteration (stably); no Marks
	index    map[string]int
	// promoted are the end iterations of the stages each trial was promoted from, in the order
	// of the syncs (a sync may name a trial before its first report reaches the fold).
	promoted map[string][]float64
}

// NewCurveFold is the learning curves of exp's run before any event.
func NewCurveFold(exp *spec.Experiment) *CurveFold {
	return &CurveFold{metric: exp.Objective.Metric, brackets: exp.Algorithm.Brackets(), index: map[string]int{}, promoted: map[string][]float64{}}
}

// Apply folds the event that follows those already applied.
func (f *CurveFold) Apply(e journal.Event) {
	switch e.Ev {
	case journal.EvReport:
		v, ok := e.Metrics[f.metric]
		if !ok {
			return
		}
		i, seen := f.index[e.Trial]
		if !seen {
			i = len(f.curves)
			f.index[e.Trial] = i
			f.curves = append(f.curves, Curve{Trial: e.Trial})
		}
		c := &f.curves[i]
		x := float64(e.Iter)
		at := sort.Search(len(c.X), func(j int) bool { return c.X[j] > x }) // after its equals: a stable sort's order
		c.X, c.Y = insertAt(c.X, at, x), insertAt(c.Y, at, v)
	case journal.EvSync:
		if e.Bracket >= len(f.brackets) || e.Stage+1 >= len(f.brackets[e.Bracket].Stages) {
			return
		}
		end := float64(f.brackets[e.Bracket].Stages[e.Stage].EndIter())
		for _, id := range e.Keep {
			f.promoted[id] = append(f.promoted[id], end)
		}
	}
}

func insertAt(s []float64, i int, v float64) []float64 {
	if i == len(s) {
		return append(s, v)
	}
	s = append(s, 0)
	copy(s[i+1:], s[i:])
	s[i] = v
	return s
}

// Len is how many trials reported the objective.
func (f *CurveFold) Len() int { return len(f.curves) }

// Curves are the curves so far, marked (LearningCurves). Their points are the fold's: read them,
// do not change them.
func (f *CurveFold) Curves() []Curve {
	out := make([]Curve, len(f.curves))
	for i, c := range f.curves {
		out[i] = f.marked(c)
	}
	return out
}

// Unmarked are the curves so far without their Marks, shared with the fold (read only): what
// choosing some of them needs (Marked marks those chosen).
func (f *CurveFold) Unmarked() []Curve { return f.curves }

// Curve is trial id's curve, marked; false when it reported nothing.
func (f *CurveFold) Curve(id string) (Curve, bool) {
	i, ok := f.index[id]
	if !ok {
		return Curve{}, false
	}
	return f.marked(f.curves[i]), true
}

// Marked is c with its promotions marked.
func (f *CurveFold) Marked(c Curve) Curve { return f.marked(c) }

func (f *CurveFold) marked(c Curve) Curve {
	c.Marks = nil
	for _, end := range f.promoted[c.Trial] {
		for j := len(c.X) - 1; j >= 0; j-- {
			if c.X[j] <= end {
				c.Marks = append(c.Marks, j)
				break
			}
		}
	}
	return c
}
