package nomad

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/executor/worker"
)

func (r *Runtime) placeTimeout() time.Duration {
	if r.PlaceTimeout > 0 {
		return r.PlaceTimeout
	}
	return 2 * time.Minute
}

// plan asks the scheduler, registering nothing, whether every task group of job fits, so that a
// gang is never half started: Nomad places task groups one by one and would run the ones that fit
// while the rest wait. A group that no node passes the constraints for (its node unknown or gone)
// fails at once; one whose node lacks room (busy with other allocations, or too small, which
// Nomad does not tell apart) is planned again until PlaceTimeout.
func (r *Runtime) plan(ctx context.Context, job *nomad.Job) error {
	deadline := time.Now().Add(r.placeTimeout())
	for {
		resp, _, err := r.Client.Jobs().Plan(job, false, (&nomad.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("plan job: %w", err)
		}
		if len(resp.FailedTGAllocs) == 0 {
			return nil
		}
		busy := true
		for _, m := range resp.FailedTGAllocs {
			busy = busy && m != nil && m.NodesExhausted > 0
		}
		if !busy {
			return fmt.Errorf("%w: %s", gang.ErrUnplaceable, unplaced(resp.FailedTGAllocs))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: no room after %v: %s", gang.ErrUnplaceable, r.placeTimeout(), unplaced(resp.FailedTGAllocs))
		}
		if err := sleep(ctx, 5*r.poll()); err != nil {
			return fmt.Errorf("plan job: %w", err)
		}
	}
}

// placed waits until Nomad has placed every task group of the registered job: a plan that fit
// can still lose a race for the same room with another gang.
func (h *handle) placed(ctx context.Context) error {
	timeout := h.r.placeTimeout()
	deadline := time.Now().Add(timeout)
	for {
		groups := map[string]bool{}
		allocs, _, err := h.r.Client.Jobs().Allocations(h.job, true, (&nomad.QueryOptions{}).WithContext(ctx))
		if err == nil {
			for _, a := range allocs {
				groups[a.TaskGroup] = true
			}
			if len(groups) >= h.workers {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: Nomad placed %d of %d workers in %v: %s", gang.ErrUnplaceable, len(groups), h.workers, timeout,
				h.placementFailure())
		}
		if err := sleep(ctx, h.r.poll()); err != nil {
			return fmt.Errorf("wait for placement: %w", err)
		}
	}
}

// abandon ends a registered job that Launch gives up on: the workers it placed are stopped,
// saving nothing, before the job is purged.
func (h *handle) abandon() {
	jobs := h.r.Client.Jobs()
	allocs, _, _ := jobs.Allocations(h.job, false, nil)
	h.abort(allocs)
	jobs.Deregister(h.job, false, nil)
	for deadline := time.Now().Add(h.r.grace() + SaveMargin); time.Now().Before(deadline); time.Sleep(h.r.poll()) {
		allocs, _, err := jobs.Allocations(h.job, false, nil)
		if err == nil && terminal(allocs) == len(allocs) {
			break
		}
	}
	jobs.Deregister(h.job, true, nil)
	h.r.deleteSecrets(h.job)
}

// abort tells the wrappers of the workers among allocs still running that their gang failed, so
// that none of them saves a checkpoint when it is stopped next. Pending ones are signalled too:
// the server may not yet know that a task has started.
func (h *handle) abort(allocs []*nomad.AllocationListStub) {
	for _, a := range allocs {
		switch a.ClientStatus {
		case "complete", "failed", "lost":
			continue
		}
		if err := h.r.Client.Allocations().Signal(&nomad.Allocation{ID: a.ID}, nil, "trainer", worker.AbortSignalName); err != nil {
			h.r.logf("trial %s: signal %s to %s (%s): %v", h.trial, worker.AbortSignalName, a.TaskGroup, a.ClientStatus, err)
		}
	}
}

func terminal(allocs []*nomad.AllocationListStub) int {
	n := 0
	for _, a := range allocs {
		switch a.ClientStatus {
		case "complete", "failed", "lost":
			n++
		}
	}
	return n
}

// placementFailure says why Nomad could not place the job, from its evaluations.
func (h *handle) placementFailure() string {
	evals, _, err := h.r.Client.Jobs().Evaluations(h.job, nil)
	if err != nil {
		return err.Error()
	}
	failed := map[string]*nomad.AllocationMetric{}
	for _, e := range evals {
		for tg, m := range e.FailedTGAllocs {
			failed[tg] = m
		}
	}
	return unplaced(failed)
}

// unplaced says, per task group, why the scheduler found no node for it.
func unplaced(failed map[string]*nomad.AllocationMetric) string {
	groups := make([]string, 0, len(failed))
	for tg := range failed {
		groups = append(groups, tg)
	}
	sort.Strings(groups)
	var why []string
	for _, tg := range groups {
		m := failed[tg]
		if m == nil {
			continue
		}
		for _, reason := range sortedKeys(m.ConstraintFiltered) {
			why = append(why, fmt.Sprintf("%s: %d node(s) filtered by %s", tg, m.ConstraintFiltered[reason], reason))
		}
		for _, dim := range sortedKeys(m.DimensionExhausted) {
			why = append(why, fmt.Sprintf("%s: %d node(s) short of %s", tg, m.DimensionExhausted[dim], dim))
		}
		if m.NodesEvaluated == 0 {
			why = append(why, tg+": no node available")
		}
	}
	if len(why) == 0 {
		return "no reason given"
	}
	return strings.Join(why, "; ")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
