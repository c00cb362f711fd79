package virtual_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/spec"
)

// The counts the state keeps as events come (runstate's tally.go: what a progress line and the
// stage loop read at every event) are what a walk over the whole run says, after every event of
// runs struck by faults: crashed and resumed drivers, lost and interrupted nodes, failed and hung
// trainers, give-ups.
func TestTalliesAreTheWalks(t *testing.T) {
	for _, job := range []struct {
		file        string
		perFunction bool
	}{{"testdata/campaign-sha.yaml", false}, {"testdata/campaign-spot.yaml", false}, {"testdata/campaign-sha.yaml", true}, {"testdata/campaign-tpe.yaml", false}} {
		file, base := job.file, planned(t, job.file)
		if job.perFunction { // billed per launch, rounded up to minutes
			exp := *base.Experiment
			exp.Cluster.Billing = spec.Billing{Model: spec.PerFunction, Increment: spec.Duration(time.Minute), Minimum: spec.Duration(time.Minute)}
			base.Experiment = &exp
		}
		clean, jct := runOnce(t, base, nil, false)
		scale := virtual.Scale{Records: len(clean.events), Nodes: clean.nodes, Launches: executorLaunches(clean.events),
			Duration: jct, Spot: base.Experiment.Cluster.Market == spec.MarketSpot}
		gaveUp := 0
		for seed := int64(1); seed <= 12; seed++ {
			path := filepath.Join(t.TempDir(), "journal.jsonl")
			f := virtual.Draw(seed, scale)
			cfg := with(base, path, f, false)
			if seed%3 == 0 { // crashing trainers and no retries: some trials give up
				for l := 12; l < 40; l += 3 {
					f.TrainerCrashes = append(f.TrainerCrashes, virtual.LaunchFault{Launch: l, At: 1})
				}
				cfg.MaxRetries = -1
			}
			if _, err := virtual.Run(context.Background(), cfg); err != nil {
				t.Logf("%s seed %d: %v (checked all the same)", file, seed, err)
			}
			events, err := journal.ReadJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			st, err := runstate.New(runstate.Plan{Experiment: base.Experiment, Alloc: base.Alloc}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range events {
				st.Apply(e)
				if why := tallyMismatch(st, e); why != "" {
					t.Fatalf("%s seed %d, after event %d (%s): %s", file, seed, i+1, e.Ev, why)
				}
			}
			for b := range st.Brackets {
				for k := range st.Brackets[b].Stages {
					gaveUp += st.FailedIn(b, k)
				}
			}
		}
		if gaveUp == 0 {
			t.Errorf("%s: no trial gave up in any schedule: the failed counts were never checked", file)
		}
	}
}

// tallyMismatch compares the state's kept counts with walks over its trials, launches and nodes.
func tallyMismatch(st *runstate.State, e journal.Event) string {
	all := 0
	for b, br := range st.Brackets {
		for k, stage := range br.Stages {
			failed, running, iters := 0, 0, 0
			for _, id := range st.Order[b] {
				tr := st.Trials[id]
				if tr.Failed[k] {
					failed++
				}
				if tr.Iter > stage.StartIter {
					iters += min(tr.Iter, stage.StartIter+stage.Iters) - stage.StartIter
				}
			}
			for _, i := range st.OpenLaunch {
				if l := st.LaunchLog[i]; l.Bracket == b && l.Stage == k {
					running++
				}
			}
			gotRunning, gotIters := st.Underway(b, k)
			if got := st.FailedIn(b, k); got != failed {
				return fmt.Sprintf("bracket %d stage %d gave up: kept %d, walked %d", b, k, got, failed)
			}
			if gotRunning != running || gotIters != iters {
				return fmt.Sprintf("bracket %d stage %d running/iterations: kept %d/%d, walked %d/%d", b, k, gotRunning, gotIters, running, iters)
			}
		}
		for _, id := range st.Order[b] {
			all += st.Trials[id].Iter
		}
		for _, n := range st.Nodes[b] {
			if got, ok := st.HeldNode(b, n.ID); !ok || got.ID != n.ID {
				return "held node " + n.ID + " not found"
			}
		}
		for _, n := range st.Draining[b] {
			if _, ok := st.HeldNode(b, n.ID); ok {
				return "draining node " + n.ID + " found held"
			}
		}
	}
	drawn, results := 0, 0
	for b, order := range st.Order {
		for i, id := range order {
			tr := st.Trials[id]
			if got, ok := st.IndexOf(id); !ok || got != st.TrialIndex(b, i) {
				return fmt.Sprintf("trial %s: index %d, walked %d", id, got, st.TrialIndex(b, i))
			}
			if tr.Params == nil {
				continue
			}
			drawn++
			for k := range st.Brackets[b].Stages {
				if _, done := tr.Done[k]; done || tr.Failed[k] {
					results++
				}
			}
		}
	}
	if st.Drawn() != drawn || st.Results() != results {
		return fmt.Sprintf("drawn/results kept %d/%d, walked %d/%d", st.Drawn(), st.Results(), drawn, results)
	}
	if st.ItersReported() != all {
		return fmt.Sprintf("iterations in all: kept %d, walked %d", st.ItersReported(), all)
	}
	if at := e.At; !at.IsZero() {
		spent, bill := st.Spent(at), st.Bill(at).Total
		if math.Abs(spent-bill) > 1e-9*max(1, bill) {
			return fmt.Sprintf("spent %v, billed %v", spent, bill)
		}
	}
	return ""
}
