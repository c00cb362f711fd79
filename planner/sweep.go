package planner

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/rubberband-hpo/rubberband/spec"
)

// SweepPoint is one point of a sweep: each planner's outcome (as Compare gives it), or the
// error that left the point without one.
type SweepPoint struct {
	Results map[string]Outcome
	Err     error // a *PointError
}

// PointError is the failure of one point of a sweep, by its index.
type PointError struct {
	Point int
	Err   error
}

func (e *PointError) Error() string { return fmt.Sprintf("sweep point %d: %v", e.Point, e.Err) }

func (e *PointError) Unwrap() error { return e.Err }

// Sweep compares the named planners (Compare) at every point of a sweep, one experiment per
// point, on workers goroutines (every CPU when workers < 1). Points are independent: one that
// fails keeps its error and the others go on. The points come back in the order of exps.
// progress, when set, is called after each point with how many are done of how many, one call at a
// time, done counting up to len(exps). When ctx ends, the points not done fail with its error.
func Sweep(ctx context.Context, exps []*spec.Experiment, names []string, workers int, progress func(done, total int)) []SweepPoint {
	return sweep(len(exps), workers, func(i int) (map[string]Outcome, error) { return Compare(ctx, exps[i], names) }, progress)
}

// sweep evaluates points 0..n-1 on workers goroutines.
func sweep(n, workers int, eval func(i int) (map[string]Outcome, error), progress func(done, total int)) []SweepPoint {
	if workers < 1 {
		workers = runtime.NumCPU()
	}
	out := make([]SweepPoint, n)
	jobs := make(chan int)
	var mu sync.Mutex // serializes progress
	done := 0
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for i := range jobs {
				res, err := eval(i)
				out[i] = SweepPoint{Results: res}
				if err != nil {
					out[i].Err = &PointError{Point: i, Err: err}
				}
				mu.Lock()
				done++
				if progress != nil {
					progress(done, n)
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}
