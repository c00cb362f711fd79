package executor_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/trial"
)

// randomJob is a small SHA or Hyperband job with a random elastic plan.
func randomJob(r *rand.Rand, hyperband bool) string {
	algo := fmt.Sprintf("{sha: {trials: %d, min_iters: 1, max_iters: %d, eta: %d}}", 4+r.IntN(12), 3+r.IntN(8), 2+r.IntN(2))
	if hyperband {
		algo = fmt.Sprintf("{hyperband: {min_iters: 1, max_iters: %d, eta: 3}}", 3+r.IntN(7))
	}
	mode := []string{"max", "min"}[r.IntN(2)]
	return fmt.Sprintf(`
name: prop
deadline: 1h
seed: %d
objective: {metric: score, mode: %s}
algorithm: %s
search_space: {x: {type: uniform, min: 0, max: 1}}
trainer: {command: [train]}
cluster: {gpus_per_node: %d, price_per_hour: 3.6, scale_latency: {value: 0s}, init_latency: {value: 0s}, max_nodes: 64}
profile: {iter_latency: {1: {mean: 1}}}
`, r.IntN(1000), mode, algo, 1+r.IntN(4))
}

// For random jobs and every prefix of a clean run's journal — as it stands, with a torn last
// record, and with a damaged last record — replaying it and carrying on gives the clean run's
// winner and survivors of every stage, no trial-stage is done twice, and no node is left held.
// The driver that died is modelled at its worst: the provider holds what the journal says plus a
// node created but not yet journaled, and the runtime holds checkpoints (with their reports)
// that the journal had not recorded as done.
func TestReplayEveryPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	jobs := 8
	if testing.Short() {
		jobs = 2
	}
	for job := range jobs {
		text := randomJob(r, job%3 == 2)
		exp := experiment(t, text)
		gpus := [][]int{}
		for _, b := range exp.Algorithm.Brackets() {
			var g []int
			for _, st := range b.Stages {
				g = append(g, min(st.Trials, 1+r.IntN(8)))
			}
			gpus = append(gpus, g)
		}
		m, _ := sim.NewModel(exp)
		alloc := m.Elastic(gpus)
		clean := newHarness(t, text)
		clean.cfg.Alloc = alloc
		_, cleanEvents, err := clean.run(t, context.Background())
		if err != nil {
			t.Fatalf("job %d: clean run: %v", job, err)
		}
		wantBest, wantSurv := outcome(t, cleanEvents)
		whole, err := os.ReadFile(clean.journal)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(whole, []byte("\n"))
		lines = lines[:len(lines)-1] // the empty piece after the last newline
		resumes := 0
		for p := 0; p < len(lines); p++ {
			for _, variant := range []string{"whole", "torn", "damaged"} {
				if variant != "whole" && p%3 != 0 {
					continue // every third prefix is enough for the damaged tails
				}
				resumes++
				h := newHarness(t, text)
				h.cfg.Alloc = alloc
				prefix := bytes.Join(lines[:p], nil)
				switch next := lines[p]; variant {
				case "torn":
					prefix = append(prefix, next[:len(next)/2]...)
				case "damaged":
					bad := bytes.Clone(next)
					bad[len(bad)/2] ^= 0x20
					prefix = append(prefix, bad...)
				}
				if err := os.WriteFile(h.journal, prefix, 0o644); err != nil {
					t.Fatal(err)
				}
				seedWorld(t, h, cleanEvents, p)
				res, events, err := h.run(t, context.Background())
				where := fmt.Sprintf("job %d (%s), prefix %d/%d (%s)", job, strings.Join(strings.Fields(text[strings.Index(text, "algorithm"):strings.Index(text, "search_space")]), " "), p, len(lines), variant)
				endsAsClean(t, where, h, res, err, events, wantBest, wantSurv)
			}
		}
		t.Logf("job %d (%s): %d journal records, %d resumes", job, strings.Fields(text[strings.Index(text, "algorithm"):])[1], len(lines), resumes)
	}
}

// seedWorld sets the fakes as a driver that died after writing the first p records left them.
func seedWorld(t *testing.T, h *harness, events []journal.Event, p int) {
	t.Helper()
	held := map[string]cloud.Node{}
	for _, e := range events[:p] {
		switch e.Ev {
		case journal.EvNodeUp:
			held[e.Node.ID] = *e.Node
		case journal.EvNodeOff:
			for _, id := range e.Nodes {
				delete(held, id)
			}
		case journal.EvDone:
			h.runtime.Keep(e.Trial, trial.Report{Iter: e.Iter, Metrics: e.Metrics})
		}
	}
	if p < len(events) {
		switch next := events[p]; next.Ev {
		case journal.EvNodeUp: // rented, not yet journaled: an orphan to release
			held[next.Node.ID] = *next.Node
		case journal.EvDone: // checkpoint saved, result not yet journaled
			h.runtime.Keep(next.Trial, trial.Report{Iter: next.Iter, Metrics: next.Metrics})
		}
	}
	for _, n := range held {
		h.provider.Adopt(n)
	}
}
