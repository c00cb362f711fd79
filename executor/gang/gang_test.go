package gang

import (
	"slices"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/placement"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
)

// A gang has one worker per GPU of its slots, ranked in slot order, each told the world's size,
// its rank on its node and rank 0's node as the master; the trainer's command comes from the spec.
func TestBuildGangRanksWorkersInSlotOrder(t *testing.T) {
	exp := &spec.Experiment{Name: "e", Trainer: spec.Trainer{Command: []string{"train"}}}
	nodes := map[string]cloud.Node{"a": {ID: "a", Addr: "10.0.0.1"}, "b": {ID: "b", Addr: "10.0.0.2"}}
	slots := []placement.Slot{{Node: "b", GPUs: []int{2, 3}}, {Node: "a", GPUs: []int{0}}}
	g := BuildGang(GangSpec{Trial: "t1", Experiment: exp, StartIter: 2, TargetIter: 4}, slots, nodes)
	if g.Trial != "t1" || !slices.Equal(g.Command, []string{"train"}) || len(g.Workers) != 3 {
		t.Fatalf("gang %+v", g)
	}
	want := []struct {
		node        string
		rank, local int
		gpu         int
	}{{"b", 0, 0, 2}, {"b", 1, 1, 3}, {"a", 2, 0, 0}}
	for i, w := range g.Workers {
		env := w.Env
		if w.Node.ID != want[i].node || env.Rank != want[i].rank || env.LocalRank != want[i].local || !slices.Equal(env.GPUs, []int{want[i].gpu}) ||
			env.WorldSize != 3 || env.MasterAddr != "10.0.0.2" || env.StartIter != 2 || env.TargetIter != 4 || env.TrialID != "t1" || env.Experiment != "e" {
			t.Errorf("worker %d: node %s, env %+v; want %+v of a world of 3 under 10.0.0.2", i, w.Node.ID, env, want[i])
		}
	}
}

// SpreadSlots fills whole nodes first, as the profiler measures a trial on g GPUs; a node without
// GPUs counts as one.
func TestSpreadSlotsFillsWholeNodesFirst(t *testing.T) {
	nodes := []cloud.Node{{ID: "a", GPUs: 4}, {ID: "b", GPUs: 4}, {ID: "c"}}
	cases := []struct {
		gpus int
		want []placement.Slot
	}{
		{1, []placement.Slot{{Node: "a", GPUs: []int{0}}}},
		{6, []placement.Slot{{Node: "a", GPUs: []int{0, 1, 2, 3}}, {Node: "b", GPUs: []int{0, 1}}}},
		{9, []placement.Slot{{Node: "a", GPUs: []int{0, 1, 2, 3}}, {Node: "b", GPUs: []int{0, 1, 2, 3}}, {Node: "c", GPUs: []int{0}}}},
		{12, []placement.Slot{{Node: "a", GPUs: []int{0, 1, 2, 3}}, {Node: "b", GPUs: []int{0, 1, 2, 3}}, {Node: "c", GPUs: []int{0}}}},
	}
	for _, c := range cases {
		got := SpreadSlots(nodes, c.gpus)
		if !slices.EqualFunc(got, c.want, func(a, b placement.Slot) bool { return a.Node == b.Node && slices.Equal(a.GPUs, b.GPUs) }) {
			t.Errorf("%d GPUs: %+v, want %+v", c.gpus, got, c.want)
		}
	}
}

// A gang with nothing to train delivers the kept report once and has ended.
func TestReportedHasEnded(t *testing.T) {
	h := Reported(trial.Report{Iter: 7})
	var got []int
	for r := range h.Reports() {
		got = append(got, r.Iter)
	}
	select {
	case <-h.Exited():
	default:
		t.Fatal("not exited")
	}
	if !slices.Equal(got, []int{7}) || h.Wait() != nil {
		t.Fatalf("reports %v, wait %v", got, h.Wait())
	}
}
