package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/spec"
)

// ashaJob parses an ASHA spec and returns its model and its ASHA block.
func ashaJob(t testing.TB, algorithm, cluster, profile string) (*Model, spec.ASHA) {
	t.Helper()
	exp, m := parseJob(t, "{asha: "+algorithm+"}", cluster, profile)
	return m, *exp.Algorithm.ASHA
}

const ashaProfile = "{iter_latency: {1: {dist: constant, value: 10}}, startup_latency: {value: 5s}}"

// Constant latencies by hand. SCALE 10 s, INIT 20 s, $3.60/h a node ($0.001/s), 5 s start-up and
// 10 s an iteration. Eta 6 over 5 trials: the rule promotes nothing, rungs 1, 6 and 36. On one
// 1-GPU node five jobs of one iteration (15 s) one after another end at 30 + 75 = 105 s; then the
// best trains on alone to the last rung (asha's finish): 5 iterations (55 s), then 30 (305 s):
// 465 s, billed from 10 s: $0.455. On a 5-GPU node the five run at once: 45 + 360 = 405 s, $0.395.
func TestASHAConstantLatencies(t *testing.T) {
	for _, tc := range []struct {
		gpusPerNode, gpus int
		jct, cost         float64
	}{{1, 1, 465, 0.455}, {5, 5, 405, 0.395}} {
		m, cfg := ashaJob(t, "{trials: 5, min_iters: 1, max_iters: 36, eta: 6}",
			fmt.Sprintf("{gpus_per_node: %d, price_per_hour: 3.6, scale_latency: {value: 10s}, init_latency: {value: 20s}}", tc.gpusPerNode), ashaProfile)
		out, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{tc.gpus}}, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if !near(out.JCT[i], tc.jct, 1e-9) || !near(out.Cost[i], tc.cost, 1e-9) {
				t.Fatalf("%d GPUs: sample %d: JCT %v cost %v, want %v %v", tc.gpus, i, out.JCT[i], out.Cost[i], tc.jct, tc.cost)
			}
		}
		if out.Promotions[0][0] != 1 || out.Promotions[0][1] != 1 {
			t.Fatalf("promoted %v", out.Promotions)
		}
	}
}

// On one slot every rung-0 result is followed by all the promotions it allows, so rung 0
// promotes every trial that was ever in the top floor(n/eta) of the first n results. For
// exchangeable results that count's mean has an exact value (onePromotions); the simulator's
// mean over many samples must agree, and be above synchronous SHA's floor(N/eta).
func TestASHAPromotionsOnOneSlot(t *testing.T) {
	const n, eta = 27, 3
	m, cfg := ashaJob(t, fmt.Sprintf("{trials: %d, min_iters: 1, max_iters: 9, eta: %d}", n, eta),
		"{gpus_per_node: 1, price_per_hour: 3.6}", ashaProfile)
	out, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{1}}, 20000, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := onePromotions(n, eta)
	t.Logf("rung 0 promotes %.3f on average; exact %.3f; SHA %d", out.Promotions[0][0], want, n/eta)
	if got := out.Promotions[0][0]; math.Abs(got-want) > 0.05 || got <= n/eta {
		t.Fatalf("rung 0 promoted %.3f on average; the exact mean is %.3f (SHA: %d)", got, want, n/eta)
	}
}

// onePromotions is the expected size of the union over k = 1..n of the top floor(k/eta) of the
// first k of n exchangeable results: for result i of value u (uniform), the number of earlier or
// later results below u among the first k grows by a Bernoulli(u) each step; i is promoted if
// 1 + that number is ever at most floor(k/eta). Integrated over u by the midpoint rule.
func onePromotions(n, eta int) float64 {
	const steps = 4000
	total := 0.0
	for s := range steps {
		u := (float64(s) + 0.5) / steps
		for i := 1; i <= n; i++ {
			// p[c]: P(c results below u among the first k, not yet promoted); starts at k = i.
			p := make([]float64, n)
			for c := 0; c < i; c++ {
				p[c] = binom(i-1, c) * math.Pow(u, float64(c)) * math.Pow(1-u, float64(i-1-c))
			}
			hit := 0.0
			for k := i; ; k++ {
				for c := range p {
					if p[c] > 0 && 1+c <= k/eta {
						hit += p[c]
						p[c] = 0
					}
				}
				if k == n {
					break
				}
				next := make([]float64, n)
				for c := range p {
					if p[c] == 0 {
						continue
					}
					next[c] += p[c] * (1 - u)
					if c+1 < n {
						next[c+1] += p[c] * u
					}
				}
				p = next
			}
			total += hit / steps
		}
	}
	return total
}

func binom(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// A schedule that shrinks as the rungs drain costs less than the same GPUs held to the end and
// takes no longer (the work that can run fits the GPUs it keeps); the same arguments give the
// same samples; a rising schedule is refused.
func TestASHAShrinkingSchedule(t *testing.T) {
	m, cfg := ashaJob(t, "{trials: 81, min_iters: 1, max_iters: 81, eta: 3}",
		"{gpus_per_node: 4, price_per_hour: 12, scale_latency: {value: 60s}, init_latency: {value: 30s}, max_nodes: 8}",
		"{iter_latency: {1: {mean: 10, std: 2}}, startup_latency: {value: 5s}}")
	fixed, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{32}}, 200, 3)
	if err != nil {
		t.Fatal(err)
	}
	elastic, _ := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{32, 16, 8, 4}}, 200, 3)
	fc, ec := Summarize(fixed.Cost), Summarize(elastic.Cost)
	fj, ej := Summarize(fixed.JCT), Summarize(elastic.JCT)
	t.Logf("fixed: $%.2f %.0fs idle %.0f GPU-s; elastic: $%.2f %.0fs idle %.0f", fc.Mean, fj.Mean, fixed.IdleGPUSeconds, ec.Mean, ej.Mean, elastic.IdleGPUSeconds)
	if !(ec.Mean < 0.9*fc.Mean) || ej.Mean > fj.Mean*1.02 || !(elastic.IdleGPUSeconds < fixed.IdleGPUSeconds) {
		t.Fatalf("fixed: $%.2f %.0fs idle %.0f GPU-s; elastic: $%.2f %.0fs idle %.0f", fc.Mean, fj.Mean, fixed.IdleGPUSeconds, ec.Mean, ej.Mean, elastic.IdleGPUSeconds)
	}
	again, _ := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{32, 16, 8, 4}}, 200, 3)
	for i := range again.JCT {
		if again.JCT[i] != elastic.JCT[i] || again.Cost[i] != elastic.Cost[i] {
			t.Fatal("the same seed gave another sample")
		}
	}
	if _, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{8, 16}}, 1, 1); err == nil {
		t.Fatal("a rising schedule was simulated")
	}
	if _, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{64}}, 1, 1); err == nil {
		t.Fatal("16 nodes of a cluster of at most 8 were simulated")
	}
}

// Stragglers and spot by hand, on the 1-GPU job of TestASHAConstantLatencies (465 s, $0.455).
//   - Every node slow (share 1, factor 2): each job takes twice its start-up and iterations:
//     five of 30 s end at 180 s, then 110 s and 610 s: 900 s, billed from 10 s: $0.890.
//   - Spot nodes that live 100 s once running, checkpointing within the notice: node 1 runs
//     10-110 s and trains the five rung-0 jobs (30-105 s); the promotion to rung 1 (55 s) begins
//     at 105 s and is cut at 110 s, in its start-up. Each replacement runs 10 s after the
//     interruption and is ready 20 s later, so it trains 75 s past a 5 s start-up: rung 1 again
//     (140-195 s), then rung 2's 300 s as 25 + 75 + 75 + 75 + 50: node 2 runs 120-220, 3 230-330,
//     4 340-440, 5 450-550, 6 560-640 s. JCT 640 s, 580 node-seconds: $0.580.
//   - The same, training through a notice of 2 minutes: each node's jobs train on until its
//     replacement is ready, 30 s after the notice. Rung 1 (105 s) trains 30 s of its 50 on node 1
//     (to 140 s), the rest on node 2 (140-165 s); rung 2's 300 s as 80 + 105 + 105 + 10: node 2
//     runs 120-250, 3 230-360, 4 340-470, 5 450-485 s (billed the minute). JCT 485 s, 580
//     node-seconds: the same cost, 155 s sooner.
func TestASHAStragglersAndSpotByHand(t *testing.T) {
	const cluster = "{gpus_per_node: 1, price_per_hour: 3.6, scale_latency: {value: 10s}, init_latency: {value: 20s}%s}"
	for _, tc := range []struct {
		name, cluster, profile string
		jct, cost              float64
	}{
		{"stragglers", "", "{iter_latency: {1: {dist: constant, value: 10}}, startup_latency: {value: 5s}, slow_nodes: {share: 1, factor: 2}}", 900, 0.890},
		{"spot", ", market: spot, spot: {price_per_hour: 3.6, lifetimes: {dist: constant, value: 100}, notice: 0s}", ashaProfile, 640, 0.580},
		{"spot, through the notice", ", market: spot, spot: {price_per_hour: 3.6, lifetimes: {dist: constant, value: 100}, notice: 2m}", ashaProfile, 485, 0.580},
	} {
		m, cfg := ashaJob(t, "{trials: 5, min_iters: 1, max_iters: 36, eta: 6}", fmt.Sprintf(cluster, tc.cluster), tc.profile)
		out, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{1}}, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if !near(out.JCT[i], tc.jct, 1e-9) || !near(out.Cost[i], tc.cost, 1e-9) {
				t.Fatalf("%s: sample %d: JCT %v cost %v, want %v %v", tc.name, i, out.JCT[i], out.Cost[i], tc.jct, tc.cost)
			}
		}
	}
}

// Spot interruptions that lose the work (on_notice: restart) cost more than those that keep it,
// and both more than none: the same job at the same rate, on common random numbers.
func TestASHASpotRestartCostsMore(t *testing.T) {
	const cluster = "{gpus_per_node: 2, price_per_hour: 6, scale_latency: {value: 30s}, init_latency: {value: 10s}, max_nodes: 8%s}"
	profile := "{iter_latency: {1: {mean: 10, std: 2}}, startup_latency: {value: 5s}}"
	mean := func(spot string) (float64, float64) {
		m, cfg := ashaJob(t, "{trials: 27, min_iters: 1, max_iters: 27, eta: 3}", fmt.Sprintf(cluster, spot), profile)
		out, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{8, 4, 2}}, 400, 5)
		if err != nil {
			t.Fatal(err)
		}
		return Summarize(out.JCT).Mean, Summarize(out.Cost).Mean
	}
	calmJ, calmC := mean("")
	keepJ, keepC := mean(", market: spot, spot: {price_per_hour: 6, interruptions_per_hour: 12}")
	lostJ, lostC := mean(", market: spot, spot: {price_per_hour: 6, interruptions_per_hour: 12, on_notice: restart}")
	t.Logf("calm %.0fs $%.3f; spot, checkpointed %.0fs $%.3f; spot, restarted %.0fs $%.3f", calmJ, calmC, keepJ, keepC, lostJ, lostC)
	if !(calmJ < keepJ && keepJ < lostJ && calmC < keepC && keepC < lostC) {
		t.Fatalf("calm %.0fs $%.3f; spot, checkpointed %.0fs $%.3f; spot, restarted %.0fs $%.3f: not in that order", calmJ, calmC, keepJ, keepC, lostJ, lostC)
	}
}

// A phase that holds what the one before holds changes nothing: Compact drops it, and the
// schedule with it runs sample for sample as the one without.
func TestASHACompact(t *testing.T) {
	if got := (ASHAPlan{GPUs: []int{8, 8, 4, 4, 4, 2}}).Compact().String(); got != "8>4>2" {
		t.Fatalf("8>8>4>4>4>2 compacts to %s", got)
	}
	m, cfg := ashaJob(t, "{trials: 81, min_iters: 1, max_iters: 81, eta: 3}",
		"{gpus_per_node: 2, price_per_hour: 6, scale_latency: {value: 60s}, init_latency: {value: 30s}, max_nodes: 8}",
		"{iter_latency: {1: {mean: 10, std: 2}}, startup_latency: {value: 5s}}")
	long, err := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{16, 16, 8, 8, 2}}, 100, 4)
	if err != nil {
		t.Fatal(err)
	}
	short, _ := m.SimulateASHA(cfg, ASHAPlan{GPUs: []int{16, 8, 2}}, 100, 4)
	for i := range long.JCT {
		if long.JCT[i] != short.JCT[i] || long.Cost[i] != short.Cost[i] {
			t.Fatalf("sample %d: 16>16>8>8>2 %v $%v, 16>8>2 %v $%v", i, long.JCT[i], long.Cost[i], short.JCT[i], short.Cost[i])
		}
	}
}

// The Gantt of TestASHAStragglersAndSpotByHand's spot job: a row per node rented (six), each
// node's provisioning first, no two jobs on one GPU at once, and rung 2's 300 s of iterations as
// five launches of a 5 s start-up each (325 s of spans), the last ending the job at 640 s.
func TestScheduleASHA(t *testing.T) {
	m, cfg := ashaJob(t, "{trials: 5, min_iters: 1, max_iters: 36, eta: 6}",
		"{gpus_per_node: 1, price_per_hour: 3.6, scale_latency: {value: 10s}, init_latency: {value: 20s}, market: spot, spot: {price_per_hour: 3.6, lifetimes: {dist: constant, value: 100}, notice: 0s}}", ashaProfile)
	sc, err := m.ScheduleASHA(cfg, ASHAPlan{GPUs: []int{1}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Rows != 6 {
		t.Fatalf("%d rows, want 6", sc.Rows)
	}
	provisioned := map[int]float64{}
	rung2, end := 0.0, 0.0
	for i, a := range sc.Spans {
		if a.Provision {
			provisioned[a.Row] = a.End
			continue
		}
		if ready, ok := provisioned[a.Row]; !ok || a.Start < ready {
			t.Fatalf("job span %+v before its node is ready", a)
		}
		for _, b := range sc.Spans[i+1:] {
			if !b.Provision && a.Row == b.Row && a.GPU == b.GPU && a.Start < b.End && b.Start < a.End {
				t.Fatalf("spans %+v and %+v overlap", a, b)
			}
		}
		if a.Stage == 2 {
			rung2 += a.End - a.Start
		}
		end = max(end, a.End)
	}
	if !near(rung2, 325, 1e-9) || !near(end, 640, 1e-9) {
		t.Fatalf("rung 2 spans %v s, the last ends at %v; want 325 and 640", rung2, end)
	}
}

// The rest of the 1-GPU job of TestASHAConstantLatencies from where a run stands, by hand
// (rungs 1, 6, 36; 5 s start-up, 10 s an iteration; $0.001 a node-second, SCALE 10 s, INIT 20 s):
//   - three trials reported rung 0, the fourth runs it (its start-up behind it), one node held:
//     10 s for it, 15 s for the fifth, then the best trains on (55 s, 305 s): 385 s, $0.385;
//   - every trial reported rung 0 and the best, promoted, waits to be relaunched at iteration 4
//     of rung 1's 6: 5 + 20 s, then 305 s: 330 s on the node held ($0.330), or 360 s with none
//     held, renting one (ready at 30 s, billed from 10 s: $0.350).
func TestASHAFromAStartByHand(t *testing.T) {
	m, cfg := ashaJob(t, "{trials: 5, min_iters: 1, max_iters: 36, eta: 6}",
		"{gpus_per_node: 1, price_per_hour: 3.6, scale_latency: {value: 10s}, init_latency: {value: 20s}}", ashaProfile)
	ladder := func(results int, losses ...float64) *asha.Ladder {
		l := asha.New(cfg)
		for i := range results {
			j, _ := l.Next()
			if err := l.Report(j.Trial, losses[i]); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	midRung0 := ladder(3, 0.3, 0.1, 0.2)
	if j, _ := midRung0.Next(); j.Trial != 3 {
		t.Fatalf("the fourth trial is %d", j.Trial)
	}
	finishing := ladder(5, 0.3, 0.1, 0.2, 0.5, 0.4)
	if j, _ := finishing.Next(); j.Trial != 1 || j.Rung != 1 {
		t.Fatalf("the rule hands out %+v, not the best (trial 1) to rung 1", j)
	}
	for _, tc := range []struct {
		name      string
		start     ASHAStart
		jct, cost float64
	}{
		{"mid rung 0", ASHAStart{Ladder: midRung0, Running: map[int]bool{3: true}, Nodes: 1}, 385, 0.385},
		{"relaunch", ASHAStart{Ladder: finishing, Trained: map[int]int{1: 4}, Nodes: 1}, 330, 0.330},
		{"relaunch, renting", ASHAStart{Ladder: finishing, Trained: map[int]int{1: 4}}, 360, 0.350},
	} {
		out, err := m.SimulateASHAFrom(cfg, &tc.start, ASHAPlan{GPUs: []int{1}}, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if !near(out.JCT[i], tc.jct, 1e-9) || !near(out.Cost[i], tc.cost, 1e-9) {
				t.Fatalf("%s: sample %d: JCT %v cost %v, want %v %v", tc.name, i, out.JCT[i], out.Cost[i], tc.jct, tc.cost)
			}
		}
	}
	if midRung0.InFlight() != 1 || finishing.InFlight() != 1 || midRung0.Results(0, 0) != 3 {
		t.Fatal("forecasting changed the run's ladder")
	}
	done := ladder(0)
	for !done.Done() {
		j, _ := done.Next()
		done.Report(j.Trial, float64(j.Trial))
	}
	out, _ := m.SimulateASHAFrom(cfg, &ASHAStart{Ladder: done, Nodes: 1}, ASHAPlan{GPUs: []int{1}}, 2, 1)
	if out.JCT[0] != 0 || out.Cost[0] != 0 {
		t.Fatalf("a finished run is forecast to take %v s and $%v more", out.JCT[0], out.Cost[0])
	}
}

// From a start where nothing has happened yet, the forecast is the plan's: sample for sample.
func TestASHAFromTheBeginningIsThePlan(t *testing.T) {
	m, cfg := ashaJob(t, "{trials: 81, min_iters: 1, max_iters: 81, eta: 3, brackets: 2}",
		"{gpus_per_node: 4, price_per_hour: 12, scale_latency: {value: 60s}, init_latency: {value: 30s}, max_nodes: 8, market: spot, spot: {price_per_hour: 4, interruptions_per_hour: 2}}",
		"{iter_latency: {1: {mean: 10, std: 2}}, startup_latency: {value: 5s}, slow_nodes: {share: 0.2, factor: 2}}")
	plan := ASHAPlan{GPUs: []int{32, 16, 8, 4}}
	fresh, err := m.SimulateASHA(cfg, plan, 100, 5)
	if err != nil {
		t.Fatal(err)
	}
	from, err := m.SimulateASHAFrom(cfg, &ASHAStart{Ladder: asha.New(cfg)}, plan, 100, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fresh.JCT {
		if from.JCT[i] != fresh.JCT[i] || from.Cost[i] != fresh.Cost[i] {
			t.Fatalf("sample %d: from an empty start %v s $%v, the plan %v s $%v", i, from.JCT[i], from.Cost[i], fresh.JCT[i], fresh.Cost[i])
		}
	}
}
