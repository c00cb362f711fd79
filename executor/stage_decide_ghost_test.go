package executor

import (
	"errors"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/spec"
)

// ghostView is a stageView of fixed nodes and no tries.
type ghostView struct{ held []cloud.Node }

func (v *ghostView) nodes() []cloud.Node { return v.held }
func (v *ghostView) nodesGen() uint64    { return uint64(len(v.held)) }
func (v *ghostView) tries(string, int) (int, int, int) {
	return 0, 0, 0
}

// A gang launched a moment before one of its nodes is lost (it has not started): its GPUs on
// the nodes still held are not given to another gang, and it is stopped as soon as it starts.
// (A virtual run at 5 interruptions per node-hour gave a relaunched gang GPUs such a gang held.)
func TestLostNodeOfGangStillStarting(t *testing.T) {
	v := &ghostView{}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		v.held = append(v.held, cloud.Node{ID: id, GPUs: 2})
	}
	st := spec.Stage{Trials: 4, Iters: 1}
	var jobs []job
	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		jobs = append(jobs, job{trial: id, st: st})
	}
	s := newStage(0, 4, 2, 5, 1, 3, jobs, nil, false)
	var launches []action
	for _, a := range s.begin(v) {
		if a.kind == acLaunch {
			launches = append(launches, a)
		}
	}
	if len(launches) != 2 {
		t.Fatalf("%d launches at the start, want 2", len(launches))
	}
	first, second := launches[0], launches[1] // first starts; second is still starting
	s.step(v, stageEvent{kind: evStarted, launch: first.launch})
	lost := second.slots[len(second.slots)-1].Node
	kept := map[string]bool{}
	for _, sl := range second.slots {
		if sl.Node != lost {
			kept[sl.Node] = true
		}
	}
	acts := s.step(v, stageEvent{kind: evEnded, launch: first.launch, o: outcome{err: errors.New("exit 1")}})
	if len(acts) == 0 || acts[len(acts)-1].kind != acCheckNodes {
		t.Fatalf("a failed gang: %+v, want the nodes checked", acts)
	}
	acts = s.step(v, stageEvent{kind: evChecked, launch: first.launch, o: outcome{trial: first.trial, err: errors.New("exit 1")},
		cause: errors.New("exit 1"), lost: lostSet{lost: {why: "gone"}}})
	for _, a := range acts {
		if a.kind != acLaunch {
			continue
		}
		for _, sl := range a.slots {
			if kept[sl.Node] {
				t.Errorf("trial %s given %v on node %s, where %s (still starting) holds %v", a.trial, sl.GPUs, sl.Node, second.trial, second.slots)
			}
		}
	}
	stopped := false
	for _, a := range s.step(v, stageEvent{kind: evStarted, launch: second.launch}) {
		stopped = stopped || (a.kind == acStop && a.launch == second.launch)
	}
	if !stopped {
		t.Error("the gang on the lost node was not stopped when it started")
	}
}
