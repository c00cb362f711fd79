package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rubberband-hpo/rubberband/server/store"
)

var errRefused = errors.New("refused")

// admitOne is a toy admission under Decide: a run of 4 GPUs and $12.50 joins when its cost
// fits the budget left after what was charged and what active runs still reserve, and starts
// at once when its GPUs fit the team's quota beside the running ones (queued otherwise).
func admitOne(id string) func(store.Ledger) (store.Decision, error) {
	return func(l store.Ledger) (store.Decision, error) {
		r := run(id, l.Team.Name, 0)
		reserved, gpus := l.Spent, 0
		for _, a := range l.Active {
			reserved += max(0, a.PredictedCostUSD-a.CostUSD)
			if a.State == store.Running {
				gpus += a.GPUs
			}
		}
		if reserved+r.PredictedCostUSD > l.Team.MonthlyBudgetUSD {
			return store.Decision{}, errRefused
		}
		if gpus+r.GPUs <= l.Team.MaxGPUs {
			r.State, r.StartedAt = store.Running, t0()
		}
		return store.Decision{Create: &r}, nil
	}
}

// Fifty admissions at once, from two stores on one database (two servers), never together
// exceed the team's budget nor its GPU quota: each decides on a ledger no other changes
// before it is written.
func testDecideConcurrent(t *testing.T, open Open) {
	s1 := withTeams(t, open, "vision") // $1000, 8 GPUs
	s2 := open(t)
	up := team("vision")
	up.MonthlyBudgetUSD = 100 // eight runs of $12.50
	must(t, s1.UpdateTeam(ctx(t), up))
	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
		errs     []error
	)
	for i := range n {
		wg.Go(func() {
			st := []store.Store{s1, s2}[i%2]
			_, err := st.Decide(ctx(t), "vision", "2026-11", admitOne(fmt.Sprintf("r%02d", i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case !errors.Is(err, errRefused):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d admissions failed: %v", len(errs), errs[0])
	}
	runs, err := s1.Runs(ctx(t), store.RunFilter{Team: "vision"})
	must(t, err)
	var cost float64
	gpus := 0
	for _, r := range runs {
		cost += r.PredictedCostUSD
		if r.State == store.Running {
			gpus += r.GPUs
		}
	}
	if admitted != 8 || len(runs) != 8 || cost > 100 || gpus != 8 {
		t.Fatalf("%d admitted, %d runs reserving $%.2f of $100, %d GPUs running of 8", admitted, len(runs), cost, gpus)
	}
}

// Decide's Queued starts or ends queued runs only while they are queued: one cancelled
// since the caller read it stays cancelled, and is not among the changes returned. Decide's own error comes back as it is and writes
// nothing; a team that is not there is ErrNotFound.
func testDecideDequeue(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	for i, id := range []string{"q1", "q2", "q3"} {
		must(t, s.CreateRun(ctx(t), run(id, "vision", i)))
	}
	stale, err := s.Runs(ctx(t), store.RunFilter{Team: "vision"})
	must(t, err)
	_, err = s.UpdateRun(ctx(t), "q3", func(r *store.Run) error { r.State, r.Message = store.Cancelled, "by alice"; return nil })
	must(t, err)
	dec, err := s.Decide(ctx(t), "vision", "2026-11", func(l store.Ledger) (store.Decision, error) {
		if len(l.Active) != 2 || l.Team.MaxGPUs != 8 || l.Spent != 0 {
			return store.Decision{}, fmt.Errorf("ledger %+v", l)
		}
		start, end, late := stale[0], stale[1], stale[2]
		start.State, start.StartedAt = store.Running, t0()
		end.State, end.EndedAt, end.Message = store.Failed, t0(), "refused: wider than the quota"
		late.State, late.StartedAt = store.Running, t0()
		return store.Decision{Queued: []store.Run{start, end, late}}, nil
	})
	must(t, err)
	if ids(dec.Queued) != "q1,q2" {
		t.Errorf("Decide says it wrote %s, want q1,q2", ids(dec.Queued))
	}
	runs, err := s.Runs(ctx(t), store.RunFilter{Team: "vision"})
	must(t, err)
	if r := runs[0]; r.State != store.Running || !r.StartedAt.Equal(t0()) {
		t.Errorf("q1 after Decide: %+v", r)
	}
	if r := runs[1]; r.State != store.Failed || r.Message != "refused: wider than the quota" || !r.EndedAt.Equal(t0()) {
		t.Errorf("q2 after Decide: %+v", r)
	}
	if r := runs[2]; r.State != store.Cancelled || r.Message != "by alice" || !r.StartedAt.IsZero() {
		t.Errorf("q3, cancelled before Decide, after it: %+v", r)
	}
	_, err = s.Decide(ctx(t), "vision", "2026-11", func(store.Ledger) (store.Decision, error) {
		r := run("q4", "vision", 5)
		return store.Decision{Create: &r}, errRefused
	})
	if !errors.Is(err, errRefused) {
		t.Fatalf("decide's error came back as %v", err)
	}
	if _, err := s.Run(ctx(t), "q4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused decision created its run: %v", err)
	}
	_, err = s.Decide(ctx(t), "nobody", "2026-11", func(store.Ledger) (store.Decision, error) { return store.Decision{}, nil })
	wantErr(t, err, store.ErrNotFound, "team nobody")
}
