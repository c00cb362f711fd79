package executor

import (
	"slices"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/gang"
	"github.com/rubberband-hpo/rubberband/spec"
)

// kinds lists the kinds of acts, in order.
func kinds(acts []action) []actionKind {
	var out []actionKind
	for _, a := range acts {
		out = append(out, a.kind)
	}
	return out
}

// find is the first act of kind k, if any.
func find(acts []action, k actionKind) (action, bool) {
	for _, a := range acts {
		if a.kind == k {
			return a, true
		}
	}
	return action{}, false
}

// Training through a notice, decision by decision (sim.Spot.Notice): two nodes of one GPU, three
// trials of 10 iterations. Node a's notice: the node is journaled as being interrupted, no gang
// is stopped, and a replacement is asked for at once. Once it is up, the gang on a is asked to
// stop at its next checkpoint, not at once; a report short of the target stops it, and its trial
// is relaunched first, before the trial waiting in the queue, on the replacement. A notice for a
// node with nothing on it and no work waiting releases it without a replacement.
func TestTrainThroughTheNotice(t *testing.T) {
	v := &ghostView{held: []cloud.Node{{ID: "a", GPUs: 1}, {ID: "b", GPUs: 1}}}
	st := spec.Stage{Trials: 3, Iters: 10}
	jobs := []job{{trial: "t1", st: st}, {trial: "t2", st: st}, {trial: "t3", st: st}}
	s := newStage(0, 1, 2, 2, 1, 3, jobs, nil, false)
	on := map[string]action{}
	for _, a := range s.begin(v) {
		if a.kind == acLaunch {
			on[a.slots[0].Node] = a
			s.step(v, stageEvent{kind: evStarted, launch: a.launch})
		}
	}
	doomed := on["a"]
	acts := s.step(v, stageEvent{kind: evNotice, node: "a", why: "spot interruption notice (test)"})
	forget, ok := find(acts, acForget)
	if !ok || !forget.lost["a"].held {
		t.Fatalf("the notice: %v, want node a journaled as being interrupted (held: it bills until released)", kinds(acts))
	}
	if _, stopped := find(acts, acStop); stopped {
		t.Fatalf("the notice stopped a gang: %v; the gang on a trains on", kinds(acts))
	}
	if _, ok := find(acts, acReplace); !ok {
		t.Fatalf("the notice: %v, want a replacement asked for at once", kinds(acts))
	}
	v.held = []cloud.Node{{ID: "b", GPUs: 1}, {ID: "c", GPUs: 1}} // a is draining; c is up
	acts = s.step(v, stageEvent{kind: evReplaced})
	if a, ok := find(acts, acStopAtReport); !ok || a.launch != doomed.launch {
		t.Fatalf("the replacement is up: %v, want launch %d stopped at its next report", kinds(acts), doomed.launch)
	}
	if _, ok := find(acts, acStop); ok {
		t.Fatalf("the replacement is up: %v; the gang is stopped at its checkpoint, not now", kinds(acts))
	}
	acts = s.step(v, stageEvent{kind: evReported, launch: doomed.launch, o: outcome{iter: 4}})
	if a, ok := find(acts, acStop); !ok || a.launch != doomed.launch {
		t.Fatalf("its report at iteration 4: %v, want its gang stopped", kinds(acts))
	}
	exited := s.step(v, stageEvent{kind: evExited, launch: doomed.launch})
	if r, ok := find(exited, acRelease); !ok || !slices.Equal(r.nodes, []string{"a"}) {
		t.Fatalf("the gang on a exited: %v, want node a released (no gang runs there)", kinds(exited))
	}
	acts = s.step(v, stageEvent{kind: evEnded, launch: doomed.launch, o: outcome{err: gang.ErrStopped, iter: 4, started: true}})
	check, ok := find(acts, acCheckNodes)
	if !ok {
		t.Fatalf("the stopped gang's end: %v, want the nodes checked", kinds(acts))
	}
	acts = s.step(v, stageEvent{kind: evChecked, launch: doomed.launch, o: check.o, cause: check.cause, lost: lostSet{}})
	fail, _ := find(acts, acFail)
	relaunch, ok := find(acts, acLaunch)
	if !fail.interrupted || !fail.retry || !ok || relaunch.trial != doomed.trial || !slices.Equal(slotNodes(relaunch.slots), []string{"c"}) {
		t.Fatalf("after the move: %+v, %v; want %s's try counted as interrupted and it relaunched first, on c", fail, kinds(acts), doomed.trial)
	}

	// An idle node noticed, nothing waiting: released, not replaced.
	idle := newStage(0, 1, 1, 2, 1, 3, []job{{trial: "t9", st: st}}, nil, false)
	v.held = []cloud.Node{{ID: "b", GPUs: 1}, {ID: "c", GPUs: 1}}
	for _, a := range idle.begin(v) {
		if a.kind == acLaunch {
			idle.step(v, stageEvent{kind: evStarted, launch: a.launch})
			free := "c"
			if a.slots[0].Node == "c" {
				free = "b"
			}
			acts := idle.step(v, stageEvent{kind: evNotice, node: free, why: "spot interruption notice (test)"})
			if _, ok := find(acts, acReplace); ok {
				t.Errorf("an idle node noticed with nothing waiting: %v, want no replacement", kinds(acts))
			}
			if r, ok := find(acts, acRelease); !ok || !slices.Equal(r.nodes, []string{free}) {
				t.Errorf("an idle node noticed: %v, want it released now", kinds(acts))
			}
		}
	}
}

// Each notice asks for its node's replacement at once, beside a request still out (the run
// counts that one's nodes as coming), as the model rents each at its own notice; the stage ends
// only once every request out was answered. Two nodes, two trials: both nodes noticed, one after
// the other; both gangs get done on their doomed nodes.
func TestEachNoticeAsksAtOnce(t *testing.T) {
	v := &ghostView{held: []cloud.Node{{ID: "a", GPUs: 1}, {ID: "b", GPUs: 1}}}
	st := spec.Stage{Trials: 2, Iters: 10}
	s := newStage(0, 1, 2, 2, 1, 3, []job{{trial: "t1", st: st}, {trial: "t2", st: st}}, nil, false)
	var launches []action
	for _, a := range s.begin(v) {
		if a.kind == acLaunch {
			launches = append(launches, a)
			s.step(v, stageEvent{kind: evStarted, launch: a.launch})
		}
	}
	for i, node := range []string{"a", "b"} {
		acts := s.step(v, stageEvent{kind: evNotice, node: node, why: "spot interruption notice (test)"})
		if r, ok := find(acts, acReplace); !ok || r.count != 2 {
			t.Fatalf("notice %d (node %s), a request out: %v, want a request for the stage's 2 nodes at once", i+1, node, kinds(acts))
		}
	}
	for _, l := range launches {
		s.step(v, stageEvent{kind: evExited, launch: l.launch})
		acts := s.step(v, stageEvent{kind: evEnded, launch: l.launch, o: outcome{iter: 10, started: true}})
		if _, ok := find(acts, acEnd); ok {
			t.Fatalf("gang %s done with two requests out: %v, want the stage to wait for them", l.trial, kinds(acts))
		}
	}
	if _, ok := find(s.step(v, stageEvent{kind: evReplaced}), acEnd); ok {
		t.Fatalf("one request answered of two: the stage ended")
	}
	if _, ok := find(s.step(v, stageEvent{kind: evReplaced}), acEnd); !ok {
		t.Fatalf("both requests answered: the stage did not end")
	}
}
