package planner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/spec"
)

// The pool evaluates every point exactly once, keeps the results in the points' order however
// the workers finish, reports progress one call at a time up to the total, and an error names
// its point while the other points go on.
func TestSweepPool(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 4}, {1, 4}, {37, 1}, {37, 4}, {37, 0}, {5, 64}} {
		t.Run(fmt.Sprintf("n%d-w%d", tc.n, tc.workers), func(t *testing.T) {
			var mu sync.Mutex
			calls := make([]int, tc.n)
			boom := errors.New("boom")
			eval := func(i int) (map[string]Outcome, error) {
				mu.Lock()
				calls[i]++
				mu.Unlock()
				time.Sleep(time.Duration((tc.n-i)%5) * time.Millisecond) // later points finish first
				if i%7 == 3 {
					return nil, boom
				}
				return map[string]Outcome{"p": {Feasible: i%2 == 0, SavingPct: ptr(float64(i))}}, nil
			}
			var seen []int
			inCall := false
			progress := func(done, total int) {
				if inCall {
					t.Error("progress called while another call runs")
				}
				inCall = true
				defer func() { inCall = false }()
				if total != tc.n {
					t.Errorf("progress total %d, want %d", total, tc.n)
				}
				seen = append(seen, done)
			}
			out := sweep(tc.n, tc.workers, eval, progress)
			if len(out) != tc.n {
				t.Fatalf("%d points back, want %d", len(out), tc.n)
			}
			for i, c := range calls {
				if c != 1 {
					t.Errorf("point %d evaluated %d times", i, c)
				}
			}
			for i, p := range out {
				if i%7 == 3 {
					var pe *PointError
					if !errors.As(p.Err, &pe) || pe.Point != i || !errors.Is(p.Err, boom) || !strings.Contains(p.Err.Error(), fmt.Sprintf("point %d:", i)) {
						t.Errorf("point %d: error %v", i, p.Err)
					}
					continue
				}
				if p.Err != nil || *p.Results["p"].SavingPct != float64(i) || p.Results["p"].Feasible != (i%2 == 0) {
					t.Errorf("point %d holds %+v, %v", i, p.Results, p.Err)
				}
			}
			for k, d := range seen {
				if d != k+1 {
					t.Fatalf("progress went %v, want 1..%d", seen, tc.n)
				}
			}
			if len(seen) != tc.n {
				t.Fatalf("progress reached %d of %d", len(seen), tc.n)
			}
		})
	}
}

func ptr(x float64) *float64 { return &x }

// Sweep gives at each point what Compare gives for that point alone, and a point whose
// experiment cannot be planned fails alone.
func TestSweepIsCompareAtEveryPoint(t *testing.T) {
	data, err := os.ReadFile("../examples/paper/table2-resnet101.yaml")
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) ([]byte, error) { return os.ReadFile("../examples/paper/" + p) }
	sw, err := spec.ParseSweep("deadline=15m,20m,30m")
	if err != nil {
		t.Fatal(err)
	}
	sweeps := []spec.Sweep{sw}
	var exps []*spec.Experiment
	for _, pt := range spec.Grid(sweeps) {
		exp, err := spec.ApplyPoint("table2.yaml", data, read, sweeps, pt)
		if err != nil {
			t.Fatal(err)
		}
		exp.Planner.Samples = 20
		exps = append(exps, exp)
	}
	broken := *exps[0]
	broken.Deadline = 0 // plan: a deadline is required
	exps = append(exps[:1], append([]*spec.Experiment{&broken}, exps[1:]...)...)
	names := []string{spec.PlannerStatic, spec.PlannerGreedy}
	got := Sweep(context.Background(), exps, names, 2, nil)
	for i, exp := range exps {
		want, werr := Compare(context.Background(), exp, names)
		if (werr != nil) != (got[i].Err != nil) {
			t.Fatalf("point %d: error %v, Compare's %v", i, got[i].Err, werr)
		}
		if werr != nil {
			if i != 1 || errors.Unwrap(got[i].Err).Error() != werr.Error() {
				t.Fatalf("point %d: error %v, Compare's %v", i, got[i].Err, werr)
			}
			continue
		}
		if !reflect.DeepEqual(got[i].Results, want) {
			t.Errorf("point %d: %+v, Compare gives %+v", i, got[i].Results, want)
		}
	}
	if got[1].Err == nil {
		t.Fatal("the broken point did not fail")
	}
}
