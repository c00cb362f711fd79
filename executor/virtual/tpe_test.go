package virtual_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
	"github.com/rubberband-hpo/rubberband/search"
	"github.com/rubberband-hpo/rubberband/spec"
)

// A run under tpe whose driver dies mid-stage (the record written whole, or torn) keeps every
// configuration its journal held, and the new driver draws each remaining trial from the
// results the journal holds when it launches it: replaying the journal's own results through
// the sampler gives every configuration it journaled, before the crash and after. Each trial
// holds only its active parameters.
func TestTPEResumesFromItsJournal(t *testing.T) {
	exp, alloc, _ := plan(t, "testdata/campaign-tpe.yaml")
	clean, _ := runOnce(t, virtual.Config{Experiment: exp, Alloc: alloc}, nil, false)
	checkDraws(t, exp, clean.events)
	// The crash: a record after the tenth draw, mid-stage of the first round.
	draws, at := 0, 0
	for i, e := range clean.events {
		if e.Ev == journal.EvLaunch && e.Params != nil {
			if draws++; draws == 10 {
				at = i + 2
				break
			}
		}
	}
	for _, torn := range []bool{false, true} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.jsonl")
			out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: path, RunID: "campaign",
				Faults: &virtual.Faults{Crashes: []virtual.Crash{{Record: at, Torn: torn}}}})
			if err != nil || !out.Result.Finished || out.Drivers != 2 {
				t.Fatalf("run: %v (finished %v, %d drivers)", err, out.Result.Finished, out.Drivers)
			}
			if b := out.World.Breaches(); len(b) > 0 {
				t.Fatalf("breaches: %v", b) // among them: a trial launched with another configuration
			}
			events, err := journal.ReadJournal(path)
			if err != nil {
				t.Fatal(err)
			}
			got, before := journal.Configurations(events), journal.Configurations(clean.events[:at-1])
			for id, c := range before {
				if !reflect.DeepEqual(got[id], c) {
					t.Fatalf("trial %s: %v before the crash, %v after", id, c, got[id])
				}
			}
			if len(got) <= len(before) {
				t.Fatalf("%d configurations after the crash, %d before: none drawn by the new driver", len(got), len(before))
			}
			checkDraws(t, exp, events)
		})
	}
}

// checkDraws replays a journal's results through the sampler at each draw it holds and wants
// the configuration journaled; each configuration holds exactly its active parameters.
func checkDraws(t *testing.T, exp *spec.Experiment, events []journal.Event) {
	t.Helper()
	brackets := exp.Algorithm.Brackets()
	tpe := search.NewTPE(exp.SearchSpace, exp.Sampler)
	params := map[string]spec.Config{}
	index := map[string]int{}
	var history []search.Observation
	n := 0
	for _, e := range events {
		switch e.Ev {
		case journal.EvTrial:
			var b, i int
			if _, err := fmt.Sscanf(e.Trial, "b%d-t%d", &b, &i); err != nil {
				t.Fatalf("trial %q: %v", e.Trial, err)
			}
			for _, br := range brackets[:b] {
				i += br.Trials()
			}
			index[e.Trial] = i
		case journal.EvLaunch:
			if e.Params == nil {
				continue
			}
			if _, drawn := params[e.Trial]; drawn {
				t.Fatalf("trial %s drawn twice", e.Trial)
			}
			want := tpe.Draw(len(params), history, search.TrialRand(exp.SamplerSeed(), index[e.Trial]))
			if fmt.Sprint(want) != fmt.Sprint(e.Params) {
				t.Fatalf("draw %d (trial %s): journaled %v, the sampler draws %v from the journal's %d results", n, e.Trial, e.Params, want, len(history))
			}
			if c := spec.Prune(exp.SearchSpace, copyConfig(e.Params)); len(c) != len(e.Params) {
				t.Fatalf("trial %s holds inactive parameters: %v", e.Trial, e.Params)
			}
			params[e.Trial] = e.Params
			n++
		case journal.EvDone, journal.EvFail:
			c, ok := params[e.Trial]
			if !ok || (e.Ev == journal.EvFail && !e.GaveUp) {
				continue
			}
			loss := math.Inf(1)
			if e.Ev == journal.EvDone && e.Metric != nil {
				loss = *e.Metric
			}
			history = append(history, search.Observation{Params: c, Budget: brackets[e.Bracket].Stages[e.Stage].EndIter(), Loss: loss})
		}
	}
	if n == 0 {
		t.Fatal("no draw in the journal")
	}
}

func copyConfig(c spec.Config) spec.Config {
	out := spec.Config{}
	for k, v := range c {
		out[k] = v
	}
	return out
}
