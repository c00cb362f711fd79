package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"testing"

	"github.com/rubberband-hpo/rubberband/asha"
)

// ashaFingerprint hashes every number a simulation gives (each sample's JCT and cost, the idle
// GPU-seconds, interruptions and promotions) bit for bit.
func ashaFingerprint(out ASHAOutcome) uint64 {
	h := fnv.New64a()
	put := func(v float64) { fmt.Fprintf(h, "%x;", math.Float64bits(v)) }
	for i := range out.JCT {
		put(out.JCT[i])
		put(out.Cost[i])
	}
	put(out.IdleGPUSeconds)
	put(out.Interruptions)
	for _, b := range out.Promotions {
		for _, p := range b {
			put(p)
		}
	}
	return h.Sum64()
}

// The simulator's indexes (the free GPU picked from per-load sets, the held GPUs counted as
// nodes start and stop, nodes released only when the phase holds fewer) and the ladder's
// blocked promoted list change no decision: on jobs that exercise each (shrinking phases,
// brackets, stragglers, spot interruptions with and without checkpoints, scale and init
// latencies, a re-plan's start; spot notices that end the jobs at once) every number is bit for
// bit what the plain scans gave. The fingerprints were taken from the simulator before it had
// the indexes (commit add95e9).
func TestASHAGoldenFingerprints(t *testing.T) {
	const spotCluster = "{gpus_per_node: 4, price_per_hour: 12, scale_latency: {value: 60s}, init_latency: {value: 30s}, max_nodes: 8, market: spot, spot: {price_per_hour: 4, interruptions_per_hour: 2, notice: 0s%s}}"
	const slowProfile = "{iter_latency: {1: {mean: 10, std: 2}}, startup_latency: {value: 5s}, slow_nodes: {share: 0.2, factor: 2}}"
	for _, tc := range []struct {
		name, algorithm, cluster, profile string
		plan                              []int
		start                             int // results reported before the forecast starts; 0: none
		want                              uint64
	}{
		{"spot, brackets, shrinking", "{trials: 81, min_iters: 1, max_iters: 81, eta: 3, brackets: 2}", fmt.Sprintf(spotCluster, ""), slowProfile, []int{32, 16, 8, 4}, 0, 0xcc1a22d7c9e45265},
		{"spot restart", "{trials: 243, min_iters: 1, max_iters: 81, eta: 3}", fmt.Sprintf(spotCluster, ", on_notice: restart"), slowProfile, []int{32, 20, 8}, 0, 0xf45b030ce82faa6d},
		{"on demand, many nodes", "{trials: 600, min_iters: 1, max_iters: 243, eta: 3}", "{gpus_per_node: 4, price_per_hour: 12, scale_latency: {value: 20s}, init_latency: {value: 10s}, max_nodes: 64}", "{iter_latency: {1: {mean: 4, std: 0.2}}, startup_latency: {value: 3s}}", []int{256, 128, 64, 16, 4}, 0, 0xd420bde9f88bd170},
		{"from a start", "{trials: 243, min_iters: 1, max_iters: 81, eta: 3}", fmt.Sprintf(spotCluster, ""), slowProfile, []int{24, 8}, 100, 0xe1e8c679ff86b520},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, cfg := ashaJob(t, tc.algorithm, tc.cluster, tc.profile)
			var start *ASHAStart
			if tc.start > 0 {
				// Eight jobs in flight, the oldest reporting (loss by trial) until tc.start have.
				l := asha.New(cfg)
				var running []int
				for reported := 0; reported < tc.start; {
					for len(running) < 8 {
						j, ok := l.Next()
						if !ok {
							break
						}
						running = append(running, j.Trial)
					}
					l.Report(running[0], float64(running[0]%17)/17)
					running, reported = running[1:], reported+1
				}
				run := map[int]bool{}
				for _, tr := range running[:4] {
					run[tr] = true
				}
				start = &ASHAStart{Ladder: l, Running: run, Trained: map[int]int{running[4]: 1}, Nodes: 3}
			}
			out, err := m.SimulateASHAFrom(cfg, start, ASHAPlan{GPUs: tc.plan}, 40, 3)
			if err != nil {
				t.Fatal(err)
			}
			if got := ashaFingerprint(out); got != tc.want {
				t.Errorf("fingerprint %#x, want %#x (mean JCT %.3f s, cost $%.4f, idle %.1f GPU-s, %.2f interruptions)", got, tc.want, mean(out.JCT), mean(out.Cost), out.IdleGPUSeconds, out.Interruptions)
			}
		})
	}
}
