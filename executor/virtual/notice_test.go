package virtual_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/virtual"
)

// Each notice asks for its node's replacement at once, beside a request still out, as the model
// rents each replacement at its own notice. Two trials of 80 iterations of 1 s (1 s of start-up)
// on two one-GPU spot nodes (30 s to rent: 20 s of SCALE, 10 s of INIT), ready at 30 s; notices
// of 40 s, injected at 50.5 s (node 1) and 55.5 s (node 2). By hand: node 1's replacement is up
// at 80.5 s; its gang stops at its next checkpoint (81 s) and is done there at 81 + 1 + 30 =
// 112 s. Node 2's, asked for at 55.5 s, is up at 85.5 s; its gang stops at 86 s, done at 112 s.
// JCT 112 s. Asked for only once the first request was answered (at 80.5 s), node 2's
// replacement would be up at 110.5 s, after the node went (95.5 s) with the gang's iteration
// under way: done at 110.5 + 1 + 16 = 127.5 s.
//
// One trial on both nodes (two GPUs, as sim's TestGangTrainsThroughTwoNoticesByHand): the gang
// trains on through both notices until both replacements are up (85.5 s), stops at its
// checkpoint at 86 s and is done on them at 86 + 1 + 25 = 112 s.
func TestEachNoticeAsksAtOnce(t *testing.T) {
	for _, trials := range []int{2, 1} {
		t.Run(fmt.Sprintf("%d trials", trials), func(t *testing.T) { eachNoticeAsksAtOnce(t, trials) })
	}
}

func eachNoticeAsksAtOnce(t *testing.T, trials int) {
	path := filepath.Join(t.TempDir(), "notices.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf(`name: notices
deadline: 1h
objective: {metric: loss, mode: min}
algorithm: {stages: [{trials: %d, iters: 80}]}
search_space: {lr: {type: loguniform, min: 1.0e-5, max: 1}}
cluster: {gpus_per_node: 1, price_per_hour: 3.6, market: spot, spot: {price_per_hour: 3.6, interruptions_per_hour: 0.000001, notice: 40s}, billing: {minimum: 0s}, scale_latency: {value: 20s}, init_latency: {value: 10s}}
profile: {iter_latency: {1: {dist: constant, value: 1}, 2: {dist: constant, value: 1}}, startup_latency: {value: 1s}}
`, trials)), 0o644)
	exp, s := load(t, path)
	alloc := s.Model().Elastic([][]int{{2}})
	var asked []float64
	start := time.Time{}
	out, err := virtual.Run(context.Background(), virtual.Config{Experiment: exp, Alloc: alloc, Journal: filepath.Join(t.TempDir(), "j.jsonl"), RunID: "notices",
		Faults: &virtual.Faults{Notices: []virtual.NodeFault{{Node: 1, After: 30500 * time.Millisecond}, {Node: 2, After: 35500 * time.Millisecond}}},
		Observe: func(e journal.Event) {
			if e.Ev == journal.EvStart && start.IsZero() {
				start = e.At
			}
			if e.Ev == journal.EvRequest {
				asked = append(asked, e.At.Sub(start).Seconds())
			}
		}})
	if err != nil || !out.Result.Finished {
		t.Fatalf("run: %v", err)
	}
	if jct := out.Result.Realized.JCT; math.Abs(jct-112) > 1e-6 || len(asked) != 3 || asked[1] != 50.5 || asked[2] != 55.5 {
		t.Errorf("JCT %.2f s, nodes asked for at %v s; by hand 112 s, at [0 50.5 55.5]", jct, asked)
	}
}
