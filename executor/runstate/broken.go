package runstate

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
)

// brokenAfter is how many trials the failure rule waits for: the first tries of the first
// brokenAfter trials to end one (at their first stage or rung) all failed the same way before
// reporting an iteration. One or two alike are bad luck; three alike, with none trained, is a
// trainer or spec bug (an import error, a wrong flag, a missing file), and the rest of the run,
// every retry of every trial, would fail the same way at full price. A retry goes to the back of
// the queue, so waiting for tries to be given up would wait for nearly all of them.
const brokenAfter = 3

// BrokenTrainerError stops a run whose first trials all failed the same way: the same rule for
// every algorithm, decided in the journal's fold, so a replay decides it alike.
type BrokenTrainerError struct {
	Trials []string // the trials, in the order they gave up
	Cause  string   // their common error, as the first said it
	RunID  string
}

func (e *BrokenTrainerError) Error() string {
	return fmt.Sprintf("the first %d trials (%s) all failed the same way: %s; a trainer or spec bug, not bad luck: stopped before the rest fail alike (read `rubberband logs %s %s`)",
		len(e.Trials), strings.Join(e.Trials, ", "), e.Cause, cmp.Or(e.RunID, "RUN"), e.Trials[0])
}

// workerIndex is what differs between two gangs' reports of one error: which worker said it.
var workerIndex = regexp.MustCompile(`worker \d+: `)

// failureKind is a failure's error with what differs between trials left out: the worker that
// said it, the trial's ID.
func failureKind(err, trial string) string {
	return strings.ReplaceAll(workerIndex.ReplaceAllString(err, ""), trial, "TRIAL")
}

// firstEnds folds the rule: the kind of each trial's first end of a first stage, in order, until
// brokenAfter of them ("": it trained through, reported, or lost its node).
type firstEnds struct {
	trials []string
	kinds  []string
	cause  string
}

func (f *firstEnds) note(trial, kind, cause string) {
	if len(f.trials) >= brokenAfter || f.seen(trial) {
		return
	}
	if len(f.trials) == 0 {
		f.cause = cause
	}
	f.trials, f.kinds = append(f.trials, trial), append(f.kinds, kind)
}

func (f *firstEnds) seen(trial string) bool {
	for _, t := range f.trials {
		if t == trial {
			return true
		}
	}
	return false
}

// Broken is the error that stops the run, or nil.
func (f *firstEnds) Broken(runID string) *BrokenTrainerError {
	if len(f.trials) < brokenAfter || f.kinds[0] == "" {
		return nil
	}
	for _, k := range f.kinds[1:] {
		if k != f.kinds[0] {
			return nil
		}
	}
	return &BrokenTrainerError{Trials: f.trials, Cause: f.cause, RunID: runID}
}
