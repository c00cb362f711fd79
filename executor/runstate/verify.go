package runstate

import (
	"fmt"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/pareto"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/spec"
)

// VerifyASHA audits an ASHA run's journal against the promotion rule itself: its results fed to
// a fresh ladder in journal order, every promotion must be the one the rule hands out at that
// point (none taken twice), and a finished run must leave the ladder done. It returns the
// winner the rule picks from those results: what the run must report.
func VerifyASHA(exp *spec.Experiment, events []journal.Event) (best string, err error) {
	a := exp.Algorithm.ASHA
	if a == nil {
		return "", fmt.Errorf("verify asha: %s is not an asha job", exp.Name)
	}
	l := asha.New(*a)
	var byIndex []string
	index := map[string]int{}
	finished := false
	for i, e := range events {
		switch e.Ev {
		case journal.EvTrial:
			index[e.Trial] = len(byIndex)
			byIndex = append(byIndex, e.Trial)
		case journal.EvPromote:
			j, ok := l.Next()
			if !ok || byIndex[j.Trial] != e.Trial || j.Rung != e.Stage || j.Bracket != e.Bracket {
				want := "nothing"
				if ok {
					want = fmt.Sprintf("%s to bracket %d rung %d", byIndex[j.Trial], j.Bracket, j.Rung)
				}
				return "", fmt.Errorf("verify asha: record %d promotes %s to bracket %d rung %d; the rule hands out %s", i+1, e.Trial, e.Bracket, e.Stage, want)
			}
		case journal.EvDone:
			report := func() error { return l.Report(index[e.Trial], search.Loss(metricOrNaN(e.Metric), exp.Objective.Mode)) }
			if exp.MultiObjective() {
				losses, violation := search.Losses(exp, e.Metrics)
				report = func() error { return l.ReportPoint(index[e.Trial], pareto.Point{Losses: losses, Violation: violation}) }
			}
			if err := report(); err != nil {
				return "", fmt.Errorf("verify asha: record %d: %w", i+1, err)
			}
		case journal.EvFail:
			if e.GaveUp {
				if err := l.Drop(index[e.Trial]); err != nil {
					return "", fmt.Errorf("verify asha: record %d: %w", i+1, err)
				}
			}
		case journal.EvFinish:
			finished = true
		}
	}
	if finished && !l.Done() {
		return "", fmt.Errorf("verify asha: the run finished with its ladder not done (%d jobs in flight, %d of %d trials started)", l.InFlight(), l.Started(), a.Trials)
	}
	t, _, ok := l.Best()
	if !ok {
		return "", nil
	}
	return byIndex[t], nil
}
