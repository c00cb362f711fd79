package executor_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

// A trainer that fails every try the same way (a bug: an import error, a wrong flag) stops the
// run after its first three trials gave up, SHA and ASHA alike, with an error that names the
// cause and the log to read; the gangs still in flight are stopped and no later trial starts.
// Before, SHA ran the whole first stage (every trial, every try) and ASHA ended "finished".
func TestBrokenTrainerStopsTheRunEarly(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    func(t *testing.T) *harness
	}{
		{"sha", func(t *testing.T) *harness {
			return newHarness(t, strings.Replace(shaSpec, "trials: 8,", "trials: 32,", 1))
		}}, // more trials than GPUs
		{"asha", func(t *testing.T) *harness { return newASHAHarness(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h(t)
			h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
				// which worker says it differs; so does how long each takes to fail
				return fake.Behavior{Err: fmt.Errorf("worker %d: exit status 1", n%2), Duration: time.Duration(1+len(g.Trial)%3+n) * time.Second}
			}
			res, events, err := h.run(t, context.Background())
			var broken *runstate.BrokenTrainerError
			if !errors.As(err, &broken) || len(broken.Trials) != 3 || !strings.Contains(err.Error(), "exit status 1") ||
				!strings.Contains(err.Error(), "rubberband logs "+cmp.Or(res.RunID, "RUN")+" "+broken.Trials[0]) {
				t.Fatalf("run: %v, want the broken trainer's error naming the log", err)
			}
			if res.Finished {
				t.Fatal("a run stopped by the rule says it finished")
			}
			started := map[string]bool{}
			for _, e := range events {
				if e.Ev == journal.EvLaunch {
					started[e.Trial] = true
				}
			}
			sampled := count(events, journal.EvTrial, "")
			t.Logf("%d of %d sampled trials started", len(started), sampled)
			if len(started) >= sampled {
				t.Fatalf("%d of %d trials started: the rule stopped nothing", len(started), sampled)
			}
			if h.provider.Held() != 0 {
				t.Fatalf("%d nodes held after the stop", h.provider.Held())
			}
		})
	}
}

// Failures that differ (a trial's own bad luck) or that follow a trial that trained through do
// not fire the rule: the run goes on and finishes with a winner.
func TestVariedFailuresDoNotStopTheRun(t *testing.T) {
	h := newHarness(t, shaSpec)
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		switch g.Trial {
		case "b0-t0001", "b0-t0002":
			return fake.Behavior{Err: errors.New("exit status 1")}
		case "b0-t0003":
			return fake.Behavior{Err: errors.New("exit status 137")}
		}
		return fake.Behavior{}
	}
	res, _, err := h.run(t, context.Background())
	if err != nil || !res.Finished || res.Best == nil {
		t.Fatalf("run: %v (finished %v)", err, res.Finished)
	}
}

// An ASHA run whose every trial failed, each its own way (so the rule does not fire), fails as
// SHA's does: no winner is no finish. Before, it ended "finished" with exit 0.
func TestASHAWhoseEveryTrialFailedFails(t *testing.T) {
	h := newASHAHarness(t)
	var tries atomic.Int32
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		return fake.Behavior{Err: fmt.Errorf("exit status %d", tries.Add(1))} // each its own
	}
	res, _, err := h.run(t, context.Background())
	if err == nil || !strings.Contains(err.Error(), "every trial failed") || res.Finished {
		t.Fatalf("run: %v (finished %v), want every trial failed", err, res != nil && res.Finished)
	}
}

// Gangs the runtime could not start (a fork that failed, a node that refused the launch: the
// same error for every trial on a loaded machine) say nothing of the trainer: the rule does not
// stop the run, whose retries then start them and finish with a winner.
func TestLaunchFailuresAreNotABrokenTrainer(t *testing.T) {
	h := newHarness(t, strings.Replace(shaSpec, "trials: 8,", "trials: 32,", 1))
	h.runtime.LaunchFault = func(g gang.Gang, n int) error {
		if n == 1 {
			return fmt.Errorf("launch %s: fork/exec train: resource temporarily unavailable", g.Trial)
		}
		return nil
	}
	res, _, err := h.run(t, context.Background())
	if err != nil || !res.Finished || res.Best == nil {
		t.Fatalf("run: %v (finished %v)", err, res != nil && res.Finished)
	}
}
