package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/fake"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// ashaSpec is a small ASHA job for the fakes: 12 trials in 2 brackets, rungs 1, 3, 9.
const ashaSpec = `
name: unit-asha
deadline: 1h
seed: 3
objective: {metric: score, mode: max}
algorithm: {asha: {trials: 12, min_iters: 1, max_iters: 9, eta: 3, brackets: 2}}
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [train]}
cluster:
  gpus_per_node: 2
  price_per_hour: 3.6
  scale_latency: {value: 0s}
  init_latency: {value: 0s}
  max_nodes: 4
profile:
  iter_latency: {1: {mean: 1}}
`

var ashaPlan = sim.ASHAPlan{GPUs: []int{6, 4, 2, 1}}

func newASHAHarness(t testing.TB) *harness {
	h := newHarness(t, ashaSpec)
	h.cfg.Alloc, h.cfg.ASHA = nil, &ashaPlan
	// Each gang takes a second an iteration, stretched by a factor of its trial's own, so that
	// results arrive out of trial order and promotions happen between them.
	h.runtime.Behave = func(g gang.Gang, n int) fake.Behavior {
		env := g.Workers[0].Env
		f := fnv.New32a()
		f.Write([]byte(g.Trial))
		stretch := 1 + float64(f.Sum32()%7)/3
		return fake.Behavior{Duration: time.Duration(float64(env.TargetIter-env.StartIter) * stretch * float64(time.Second))}
	}
	return h
}

// checkASHAJournal audits a journal (runstate.VerifyASHA) and returns the rule's winner.
func checkASHAJournal(t *testing.T, exp *spec.Experiment, events []journal.Event) string {
	t.Helper()
	best, err := runstate.VerifyASHA(exp, events)
	if err != nil {
		t.Fatal(err)
	}
	return best
}

func TestASHARun(t *testing.T) {
	h := newASHAHarness(t)
	res, events, err := h.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Finished || res.Best == nil {
		t.Fatalf("finished %v, best %v", res.Finished, res.Best)
	}
	if want := checkASHAJournal(t, h.cfg.Experiment, events); res.Best.Trial != want {
		t.Fatalf("winner %s, the rule's %s", res.Best.Trial, want)
	}
	// The audit sees a decision taken twice.
	for i, e := range events {
		if e.Ev == journal.EvPromote && e.Stage > 0 {
			tampered := append(slices.Clone(events[:i+1]), events[i:]...)
			if _, err := runstate.VerifyASHA(h.cfg.Experiment, tampered); err == nil {
				t.Fatal("a promotion journaled twice passed the audit")
			}
			break
		}
	}
	if _, peak := h.runtime.Running(); peak > ashaPlan.GPUs[0] || peak < 2 {
		t.Fatalf("%d gangs at once under a plan of %v", peak, ashaPlan.GPUs)
	}
	if h.provider.Held() != 0 {
		t.Fatalf("%d nodes held after the run", h.provider.Held())
	}
	// Phases in order, each shrinking the cluster: after phase j begins, no gang starts beyond
	// its GPUs, and the idle nodes past its count go at once.
	phase, running, held := -1, map[string]bool{}, map[string]bool{}
	startIter := map[string]int{} // trial -> the iteration its rung starts from
	for _, e := range events {
		switch e.Ev {
		case journal.EvPhase:
			if e.Phase != phase+1 || e.GPUs != ashaPlan.GPUs[e.Phase] {
				t.Fatalf("phase %d (%d GPUs) after phase %d", e.Phase, e.GPUs, phase)
			}
			phase = e.Phase
		case journal.EvNodeUp:
			held[e.Node.ID] = true
		case journal.EvNodeOff:
			for _, id := range e.Nodes {
				delete(held, id)
			}
		case journal.EvPromote:
			startIter[e.Trial] = h.cfg.Experiment.Algorithm.ASHA.Rungs(e.Bracket)[e.Stage] // its target, checked below
		case journal.EvLaunch:
			if !strings.HasPrefix(e.Trial, fmt.Sprintf("b%d-", e.Bracket)) {
				t.Fatalf("%s launched as bracket %d's", e.Trial, e.Bracket)
			}
			running[e.Trial] = true
			if len(running) > ashaPlan.GPUs[phase] {
				t.Fatalf("%d gangs in phase %d of %v", len(running), phase, ashaPlan.GPUs)
			}
		case journal.EvDone, journal.EvFail:
			if e.Ev == journal.EvFail {
				t.Fatalf("%s failed in a run without faults: %s", e.Trial, e.Error)
			}
			delete(running, e.Trial)
		}
	}
	if phase != len(ashaPlan.GPUs)-1 {
		t.Fatalf("the run ended in phase %d of %v", phase, ashaPlan.GPUs)
	}
	if len(res.Phases) != len(ashaPlan.GPUs) {
		t.Fatalf("%d phases in the result", len(res.Phases))
	}
	var sum float64
	for _, p := range res.Phases {
		sum += p.Cost
	}
	if math.Abs(sum-res.Realized.Cost) > 1e-9 || res.Realized.Cost <= 0 {
		t.Fatalf("phases cost %v, the run %v", sum, res.Realized.Cost)
	}
	// A promoted trial resumes from its checkpoint at the rung below and trains to its rung.
	for _, g := range h.runtime.Launches {
		env := g.Workers[0].Env
		if env.StartIter > 0 && env.StartIter >= env.TargetIter {
			t.Fatalf("%s launched from %d to %d", g.Trial, env.StartIter, env.TargetIter)
		}
	}
	var top *runstate.TrialResult
	for i := range res.Trials {
		tr := &res.Trials[i]
		if tr.State != trial.Stopped {
			t.Fatalf("trial %s ended %s", tr.ID, tr.State)
		}
		if tr.ID == res.Best.Trial {
			top = tr
		}
	}
	if top == nil || top.Iter != 9 {
		t.Fatalf("the winner %+v did not train max_iters", top)
	}
}

// A driver that dies at any point of an ASHA run and is resumed keeps every decision journaled
// before it died: no promotion is taken twice, every one is the rule's, and the run finishes
// with no node left billing.
func TestASHAResumeAnywhere(t *testing.T) {
	clean := newASHAHarness(t)
	_, events, err := clean.run(t, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(clean.journal)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(whole, []byte("\n"))
	lines = lines[:len(lines)-1]
	for cut := 1; cut < len(lines); cut++ {
		h := newASHAHarness(t)
		if err := os.WriteFile(h.journal, bytes.Join(lines[:cut], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		seedWorld(t, h, events, cut)
		res, all, err := h.run(t, context.Background())
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if w := checkASHAJournal(t, h.cfg.Experiment, all); !res.Finished || res.Best == nil || res.Best.Trial != w {
			t.Fatalf("cut %d: finished %v, best %v, the rule's %s", cut, res.Finished, res.Best, w)
		}
		if h.provider.Held() != 0 {
			t.Fatalf("cut %d: %d nodes held after the run", cut, h.provider.Held())
		}
	}
}

// An ASHA run needs its plan, and refuses one that does not fit.
func TestASHANeedsItsPlan(t *testing.T) {
	h := newASHAHarness(t)
	h.cfg.ASHA = nil
	if _, _, err := h.run(t, context.Background()); !errors.Is(err, runstate.ErrNoASHAPlan) {
		t.Fatalf("err %v", err)
	}
	h = newASHAHarness(t)
	h.cfg.ASHA = &sim.ASHAPlan{GPUs: []int{2, 4}}
	if _, _, err := h.run(t, context.Background()); err == nil {
		t.Fatal("a rising plan ran")
	}
}
