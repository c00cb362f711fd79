package sim

import (
	"testing"
)

// Every TRAIN node of the DAG is on the schedule, on rows the plan holds, and no two trials use
// one node row's GPU slot at once in a wave plan with one GPU per node.
func TestScheduleCoversTheDAG(t *testing.T) {
	s := job(t, "{sha: {trials: 27, min_iters: 1, max_iters: 27, eta: 3}}",
		"{gpus_per_node: 4, price_per_hour: 4, scale_latency: {value: 10s}, init_latency: {value: 5s}}",
		"{iter_latency: {1: {mean: 10, std: 1}, 2: {mean: 6, std: 1}, 4: {mean: 4}, 8: {mean: 3}}}", 1, 1)
	a := s.Model().Elastic([][]int{{9, 18, 12, 8}}) // waves, then 2, 4 and 8 GPUs per trial
	sc, err := s.Schedule(a)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := BuildDAG(s.Model(), s.Brackets(), a)
	trains := 0
	for _, n := range g.Nodes {
		if n.Kind == Train {
			trains++
		}
	}
	seen := map[[2]int]int{}
	for _, sp := range sc.Spans {
		if sp.Row < 0 || sp.Row >= sc.Rows || sp.End < sp.Start {
			t.Fatalf("span %+v outside %d rows", sp, sc.Rows)
		}
		if !sp.Provision {
			seen[[2]int{sp.Stage, sp.Trial}]++
		}
	}
	if sc.TrainDAG != trains || len(seen) != trains {
		t.Fatalf("%d TRAIN nodes, %d on the schedule (%d counted)", trains, len(seen), sc.TrainDAG)
	}
	// The last stage's trial has 8 GPUs: two node rows.
	if seen[[2]int{3, 0}] != 2 {
		t.Fatalf("the 8-GPU trial spans %d rows", seen[[2]int{3, 0}])
	}
	if len(sc.StageEnds) != 4 || sc.Rows != 5 {
		t.Fatalf("stage ends %v, rows %d", sc.StageEnds, sc.Rows)
	}
}
