package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rubberband-hpo/rubberband/server/store"
)

// increment adds one to the run's priority through UpdateRun from n goroutines at once, on
// the stores given in turn, and checks that no increment was lost.
func increment(t *testing.T, n int, stores ...store.Store) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := stores[i%len(stores)].UpdateRun(ctx(t), "r1", func(r *store.Run) error {
				r.Priority++
				return nil
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	r, err := stores[0].Run(ctx(t), "r1")
	must(t, err)
	if r.Priority != n {
		t.Fatalf("priority %d after %d concurrent increments: %d lost", r.Priority, n, n-r.Priority)
	}
}

// Twenty goroutines incrementing one field through UpdateRun lose none of it.
func testUpdateRunConcurrent(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	increment(t, 20, s)
}

// Two Store values on one database, as two servers, serialise their writes: increments from
// both are all kept, and of two creates of one run ID exactly one wins.
func testTwoStores(t *testing.T, open Open) {
	a := withTeams(t, open, "vision")
	b := open(t)
	must(t, a.CreateRun(ctx(t), run("r1", "vision", 0)))
	increment(t, 20, a, b)

	for i := range 5 {
		id := fmt.Sprintf("race%d", i)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, s := range []store.Store{a, b} {
			wg.Go(func() { errs[j] = s.CreateRun(ctx(t), run(id, "vision", i)) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrExists):
				t.Fatalf("create %s: %v, want nil or ErrExists", id, err)
			}
		}
		if won != 1 {
			t.Fatalf("create %s from two stores: %d succeeded (%v), want 1", id, won, errs)
		}
	}
	if _, err := b.Run(ctx(t), "race4"); err != nil {
		t.Fatalf("the second store does not see the first's run: %v", err)
	}
}

// Charges of one run from many goroutines, each with a cost so far, in any order: the run ends
// at the highest and its team is charged exactly that, whatever interleaving happened.
func testChargeRunConcurrent(t *testing.T, open Open) {
	s := withTeams(t, open, "vision")
	must(t, s.CreateRun(ctx(t), run("r1", "vision", 0)))
	const n = 20
	var wg sync.WaitGroup
	growths := make([]float64, n)
	for i := range n {
		wg.Go(func() {
			g, err := s.ChargeRun(ctx(t), "r1", float64((i*7)%n+1), "2026-11")
			if err != nil {
				t.Error(err)
			}
			growths[i] = g
		})
	}
	wg.Wait()
	sum := 0.0
	for _, g := range growths {
		sum += g
	}
	spent, err := s.Spent(ctx(t), "vision", "2026-11")
	must(t, err)
	r, err := s.Run(ctx(t), "r1")
	must(t, err)
	if spent != n || sum != n || r.CostUSD != n {
		t.Fatalf("spent %v, growths add to %v, run's cost %v: want %d each", spent, sum, r.CostUSD, n)
	}
}
