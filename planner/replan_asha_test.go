package planner

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/asha"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// An ASHA job whose width matters: 96 trials on 1-GPU nodes, rungs 1, 4 and 16. Planned 7>4>2.
const ashaReplanJob = `
name: t
deadline: 80s
seed: 1
objective: {metric: acc}
algorithm: {asha: {trials: 96, min_iters: 1, max_iters: 16, eta: 4}}
cluster: {gpus_per_node: 1, price_per_hour: 3.6, max_nodes: 16, billing: {minimum: 0s},
  scale_latency: {value: 3s}, init_latency: {value: 1s}}
profile:
  iter_latency: {1: {mean: 1.0, std: 0.1}}
  startup_latency: {value: 0.5s}
planner: {samples: 200, deadline_quantile: 0.9}
`

// ashaReplanSetup plans a job and plays its ladder on the plan's first GPUs until started
// trials have started (playLadder).
func ashaReplanSetup(t *testing.T, job string, started int) (*spec.Experiment, *sim.Model, *ASHAResult, sim.ASHAStart) {
	t.Helper()
	exp, m := parseModel(t, job)
	res, err := PlanASHA(context.Background(), exp, m)
	if err != nil {
		t.Fatal(err)
	}
	return exp, m, res, playLadder(t, m, *exp.Algorithm.ASHA, res.Elastic.Plan.GPUs[0], started)
}

// playLadder plays cfg's ladder on slots GPUs until started trials have started (the oldest
// job reporting first, losses by trial): where the run stands, every slot running a job begun
// at its rung's start, the nodes of the slots held.
func playLadder(t testing.TB, m *sim.Model, cfg spec.ASHA, slots, started int) sim.ASHAStart {
	t.Helper()
	l := asha.New(cfg)
	var running []asha.Job
	for {
		for len(running) < slots && l.Started() < started {
			j, ok := l.Next()
			if !ok {
				break
			}
			running = append(running, j)
		}
		if l.Started() >= started {
			break
		}
		if err := l.Report(running[0].Trial, float64(running[0].Trial%7)); err != nil {
			t.Fatal(err)
		}
		running = running[1:]
	}
	start := sim.ASHAStart{Ladder: l, Running: map[int]bool{}, Nodes: m.NodesFor(slots)}
	for _, j := range running {
		start.Running[j.Trial] = true
	}
	return start
}

// paced is the model as a run that observed iterations f times the profile's sees it.
func paced(m *sim.Model, f float64) *sim.Model {
	return m.Posterior(sim.Evidence{Iter: map[sim.IterKey]sim.Observed{{Offer: 0, GPUs: 1}: {Sum: f * 1000, N: 1000}}})
}

// Before anything has happened, the forecast of the plan is the plan's prediction, sample for
// sample (the same seed and samples), and it holds.
func TestReplanASHAFromTheStartIsThePlan(t *testing.T) {
	exp, m, res, _ := ashaReplanSetup(t, ashaReplanJob, 0)
	cfg := *exp.Algorithm.ASHA
	rev, err := ReplanASHA(m, cfg, ASHAPresent{Start: sim.ASHAStart{Ladder: asha.New(cfg)}, Plan: res.Elastic.Plan}, DefaultReplanRules(exp))
	if err != nil {
		t.Fatal(err)
	}
	if rev.Change || rev.ASHA.String() != res.Elastic.Plan.String() || rev.Before.Cost != res.Elastic.Cost.Mean || rev.Before.JCT != res.Elastic.quantile || rev.Before.MissProb != res.Elastic.PMiss {
		t.Fatalf("revision %+v of the plan %s (JCT %.2f at the quantile, $%.4f, P(miss) %.3f)", rev, res.Elastic.Plan, res.Elastic.quantile, res.Elastic.Cost.Mean, res.Elastic.PMiss)
	}
}

// Forty trials in, 20 s on: on the profile's pace the plan holds; at 1.4 times it, the plan is
// forecast to miss, and the revision holds more GPUs now, forecast to meet the deadline.
func TestReplanASHACatchesUpOnASlowJob(t *testing.T) {
	exp, m, res, start := ashaReplanSetup(t, ashaReplanJob, 40)
	cfg, rules := *exp.Algorithm.ASHA, DefaultReplanRules(exp)
	now := ASHAPresent{Start: start, Plan: res.Elastic.Plan, Elapsed: 20, Spent: 0.08}
	rev, err := ReplanASHA(m, cfg, now, rules)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Change || rev.Reason != "the plan holds" || rev.Before.MissProb > 0.1 || rev.Before.JCT <= now.Elapsed || rev.Before.Cost <= now.Spent {
		t.Fatalf("on course: %+v", rev)
	}
	rev, err = ReplanASHA(paced(m, 1.4), cfg, now, rules)
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Change || !strings.Contains(rev.Reason, "misses the deadline") || rev.Before.MissProb < 0.2 || rev.After.MissProb > 0.1 ||
		rev.ASHA.GPUs[0] <= res.Elastic.Plan.GPUs[0] || rev.After.JCT >= rev.Before.JCT {
		t.Fatalf("slow: %s -> %+v", res.Elastic.Plan, rev)
	}
	if m.CheckASHA(rev.ASHA) != nil {
		t.Fatalf("the revision %s is not a schedule", rev.ASHA)
	}
	if start.Ladder.InFlight() != len(start.Running) || start.Ladder.Started() != 40 {
		t.Fatal("re-planning changed the run's ladder")
	}
}

// A forecast over budget.max_cost_usd gets the cheapest schedule, the deadline giving way as
// little as it must.
func TestReplanASHAForTheBudget(t *testing.T) {
	exp, m, res, start := ashaReplanSetup(t, ashaReplanJob, 40)
	rules := DefaultReplanRules(exp)
	now := ASHAPresent{Start: start, Plan: res.Elastic.Plan, Elapsed: 10, Spent: 0.05}
	rules.Budget = 0.25
	rev, err := ReplanASHA(m, *exp.Algorithm.ASHA, now, rules)
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Change || !strings.Contains(rev.Reason, "over the budget") || rev.Before.Cost <= rules.Budget || rev.After.Cost >= rev.Before.Cost ||
		rev.OverBudget != (rev.After.Cost > rules.Budget) || rev.DeadlineGivesWay != (rev.After.MissProb > 1-rules.Quantile) {
		t.Fatalf("%+v", rev)
	}
	t.Logf("%s -> %s: forecast $%.3f -> $%.3f, JCT %.1f -> %.1f s", res.Elastic.Plan, rev.ASHA, rev.Before.Cost, rev.After.Cost, rev.Before.JCT, rev.After.JCT)
}

// The quickstart's rest is the best trial's chain of rungs: once it runs late no schedule meets
// the deadline and none is much faster, so the plan is kept rather than made dearer for nothing.
func TestReplanASHAKeepsAPlanNothingBeats(t *testing.T) {
	job, err := os.ReadFile("../examples/asha-quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exp, m, res, start := ashaReplanSetup(t, string(job), 48)
	now := ASHAPresent{Start: start, Plan: res.Elastic.Plan, Elapsed: 15, Spent: 0.1}
	rev, err := ReplanASHA(m, *exp.Algorithm.ASHA, now, DefaultReplanRules(exp))
	if err != nil {
		t.Fatal(err)
	}
	if rev.Change || !strings.Contains(rev.Reason, "none is 5% faster") || rev.Before.MissProb < 0.5 || math.IsNaN(rev.Before.Cost) {
		t.Fatalf("%+v", rev)
	}
}

// A large job's re-plan (a screen of a quarter of the samples, the grid, one descent, the pick
// priced on all samples), forced on the slow job of TestReplanASHACatchesUpOnASlowJob, against
// the plain one: it holds the plan on course; on a slow pace it too changes it for one forecast
// to meet the deadline, within 5% of the plain re-plan's forecast cost, its forecast on all
// the samples.
func TestLargeReplanASHAAgainstPlain(t *testing.T) {
	exp, m, res, start := ashaReplanSetup(t, ashaReplanJob, 40)
	cfg, rules := *exp.Algorithm.ASHA, DefaultReplanRules(exp)
	now := ASHAPresent{Start: start, Plan: res.Elastic.Plan, Elapsed: 20, Spent: 0.08}
	rev, err := replanASHA(m, cfg, now, rules, rules.Samples/4)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Change || rev.Reason != "the plan holds" {
		t.Fatalf("on course: %+v", rev)
	}
	slow := paced(m, 1.4)
	plain, err := replanASHA(slow, cfg, now, rules, 0)
	if err != nil {
		t.Fatal(err)
	}
	large, err := replanASHA(slow, cfg, now, rules, rules.Samples/4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plain %s $%.4f P(miss) %.2f; large %s $%.4f P(miss) %.2f", plain.ASHA, plain.After.Cost, plain.After.MissProb, large.ASHA, large.After.Cost, large.After.MissProb)
	if !large.Change || !strings.Contains(large.Reason, "misses the deadline") || large.After.MissProb > 0.1 || large.After.Cost > 1.05*plain.After.Cost {
		t.Fatalf("slow, large re-plan: %+v; plain: %+v", large, plain)
	}
	// Its forecast is the whole simulation's: the same as the plain re-plan's for the same schedule.
	forecast, err := replanASHA(slow, cfg, ASHAPresent{Start: start, Plan: large.ASHA, Elapsed: now.Elapsed, Spent: now.Spent}, rules, 0)
	if err != nil {
		t.Fatal(err)
	}
	if forecast.Before != large.After {
		t.Fatalf("the large re-plan forecasts %s at %+v, the plain one at %+v", large.ASHA, large.After, forecast.Before)
	}
}

// trialsLeft is the job's trials before any result, none once every rung holds its results,
// and in between as the results come in.
func TestTrialsLeft(t *testing.T) {
	exp, m := parseModel(t, ashaReplanJob)
	cfg := *exp.Algorithm.ASHA
	if n := trialsLeft(cfg, &sim.ASHAStart{Ladder: asha.New(cfg)}); n != cfg.Trials {
		t.Fatalf("before any result: %d trials left, want %d", n, cfg.Trials)
	}
	prev := cfg.Trials
	for _, started := range []int{24, 48, 96} {
		n := trialsLeft(cfg, new(playLadder(t, m, cfg, 4, started)))
		if n >= prev || n <= 0 {
			t.Fatalf("%d started: %d trials left (%d at fewer)", started, n, prev)
		}
		prev = n
	}
	l := asha.New(cfg)
	for !l.Done() {
		j, ok := l.Next()
		if !ok {
			t.Fatal("the ladder stalled")
		}
		if err := l.Report(j.Trial, float64(j.Trial%7)); err != nil {
			t.Fatal(err)
		}
	}
	if n := trialsLeft(cfg, &sim.ASHAStart{Ladder: l}); n != 0 {
		t.Fatalf("every result in: %d trials left", n)
	}
}
