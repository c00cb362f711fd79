package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
)

// Spot interruptions emulated on the local backend (the interruptions the plan expects, seeded
// by the spec): each notice reaches the driver, which journals the node as being interrupted
// (still billing) and replaces it at once; the gangs there train through the notice, and either
// get done there, move to the replacement at their next checkpoint, or stop with the node,
// saving. The run finishes with the winner of the same plan run on-demand, every moved trial goes
// on where it was, and the report lists the interruptions.
func TestLocalSpotInterruptionsEmulated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	onDemand, src := syntheticSpec(t, dir, "on-demand.yaml")
	spot := emulatedSpot(t, dir, src, "spot.yaml", "market: spot")
	plan := planFile(t, dir, spot, "8,8,4,2")
	out, _, code := rb(t, "plan", spot)
	if code != 0 || !strings.Contains(out, "INTERRUPTIONS") {
		t.Fatalf("plan of a spot job shows no expected interruptions:\n%s", out)
	}
	state := filepath.Join(dir, "spot")
	events := runLocal(t, spot, plan, state)
	journaled, tries, resumed := checkInterruptions(t, events)
	rep := readRunReport(t, state)
	if len(journaled) == 0 || len(rep.Interruptions) == 0 {
		t.Fatalf("no interruption (%d journaled, %d tries, report %+v)", len(journaled), tries, rep.Interruptions)
	}
	through := 0 // notices trained through: the node journaled as still billing
	for _, e := range events {
		if e.Ev == journal.EvInterrupt && e.Draining {
			through++
		}
	}
	if through == 0 {
		t.Errorf("no notice was trained through: %+v", rep.Interruptions)
	}
	said := false // an interruption learnt from its notice says so (one found gone does not)
	for _, in := range rep.Interruptions {
		said = said || strings.Contains(in.Why, "spot interruption notice (emulated)")
	}
	if !said {
		t.Errorf("no interruption says it came from a notice: %+v", rep.Interruptions)
	}
	sameWinnerAsLocal(t, nil, rep, onDemand, plan, filepath.Join(dir, "on-demand"))
	t.Logf("%d node(s) interrupted, %d tries relaunched from their checkpoints (%v); cost realized $%.4f, predicted $%.4f (%+.1f%%); JCT realized %.1f s, predicted %.1f s (%+.1f%%)",
		len(journaled), tries, resumed, rep.Realized.Cost, rep.Predicted.Cost, format.Pct(rep.Realized.Cost, rep.Predicted.Cost),
		rep.Realized.JCT, rep.Predicted.JCT, format.Pct(rep.Realized.JCT, rep.Predicted.JCT))
}

// A budget under the plan's predicted cost: plan says both figures and exits 3; run refuses the
// same way before it makes a run; a budget above it passes, and plan shows it.
func TestBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, src := syntheticSpec(t, dir, "synthetic.yaml")
	withBudget := func(usd string) string {
		f := filepath.Join(dir, "budget-"+usd+".yaml")
		os.WriteFile(f, []byte(strings.ReplaceAll(src, "--spec, synthetic.yaml]", "--spec, "+f+"]")+"budget: {max_cost_usd: "+usd+"}\n"), 0o644)
		return f
	}
	out, errOut, code := rb(t, "plan", withBudget("0.05"))
	if code != 3 || !strings.Contains(errOut, "over budget") || !strings.Contains(errOut, "the budget is $0.05") || !strings.Contains(out, "OVER BUDGET") {
		t.Fatalf("plan over budget: exit %d\n%s\n%s", code, out, errOut)
	}
	state := filepath.Join(dir, "state")
	if _, errOut, code := rb(t, "run", withBudget("0.05"), "--state", state); code != 3 || !strings.Contains(errOut, "over budget") {
		t.Fatalf("run over budget: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(state, rundir.RunJSON)); err == nil {
		t.Fatal("a run refused for its budget left run.json")
	}
	if out, errOut, code := rb(t, "plan", withBudget("100")); code != 0 || !strings.Contains(out, "budget     $100.00") || !strings.Contains(out, "within it") {
		t.Fatalf("plan within budget: exit %d\n%s\n%s", code, out, errOut)
	}
}

// Spot fidelity: the paper's Table 2 job on spot (examples/paper/table2-spot.yaml: 30% of the
// on-demand price, 10 interruptions per 100 node-hours, a 20-minute deadline at p50) run for real
// on the local backend under 5 seeds, its interruptions emulated as the model draws them (seeded
// by the run), the synthetic trainer sleeping as the profile says, at 1/10 of real time, the plan
// kept. At least 4 of 5 meet the deadline, and the mean realized cost is within 10% of the mean
// predicted (the goal is 5%; the closing note has the figure).
//
// The plan's P(miss) is 3%, but seed 2's trial draws a last stage 2.3σ long (736 s against 703 s
// on average): it ends about 4 s before the deadline, and launch overheads that the time scale
// magnifies decide it. At 1/20 a loaded CI machine made it miss by 8 s; 1/10 halves them.
//
// A benchmark of `make fidelity` (about ten minutes); TestSpotTable2InVirtualTime holds the same
// claims in virtual time.
func BenchmarkFidelitySpot(b *testing.B) { fidelitySpot(b) }

func fidelitySpot(t testing.TB) {
	tab := fidelityTable("spot: examples/paper/table2-spot.yaml on the local backend at time scale 0.1, the plan kept", append(fidelityCols, "INTERRUPTIONS")...)
	defer tab.Flush() // what was measured, should a run fail (a second Flush writes nothing)
	src, err := os.ReadFile("../examples/paper/table2-spot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	profile, err := filepath.Abs("../examples/paper/profiles/resnet101-cifar10-p3.8xlarge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	spec := filepath.Join(dir, "table2-spot.yaml")
	text := strings.Replace(string(src), "profile: {file: profiles/resnet101-cifar10-p3.8xlarge.yaml}", "profile: {file: "+profile+"}", 1) +
		"trainer: {command: [rubberband, trainer, synthetic, --spec, " + spec + "]}\n"
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	const deadline = 20 * 60.0
	met, interruptions := 0, 0
	var predicted, realized float64
	for seed := 1; seed <= 5; seed++ {
		state := filepath.Join(dir, fmt.Sprint("state-", seed))
		if _, errOut, code := rbTimed(t, "run", spec, "--seed", fmt.Sprint(seed), "--state", state, "--time-scale", "0.1", "--no-replan"); code != 0 {
			t.Fatalf("seed %d: %s", seed, errOut)
		}
		r := readRunReport(t, state)
		if r.Realized.JCT <= deadline {
			met++
		}
		interruptions += len(r.Interruptions)
		predicted += r.Predicted.Cost
		realized += r.Realized.Cost
		fidelityRow(tab, fmt.Sprint(seed), r, len(r.Interruptions))
	}
	tab.Flush()
	fmt.Printf("%d of 5 met the deadline; mean cost $%.3f realized, $%.3f predicted (%+.1f%%); %d interruption(s) in all",
		met, realized/5, predicted/5, format.Pct(realized, predicted), interruptions)
	fmt.Println()
	if met < 4 || math.Abs(format.Pct(realized, predicted)) > 10 {
		t.Fatalf("%d of 5 met the deadline; mean cost %+.1f%% off the prediction", met, format.Pct(realized, predicted))
	}
}

// Spot fidelity at a high rate: the synthetic job (testdata/synthetic.yaml: SHA of 16 trials, a
// minute and a quarter in all) on spot nodes interrupted 40 times an hour each, with a 10 s
// notice, run for real on the local backend at 1/20 of real time under 40 seeds (seeding each
// node's lifetime), the plan kept (8, 8, 4, 2 GPUs; predicted with 10,000 samples). At this rate
// a run loses about one node, some several, and many are lost while they start or idle at a
// SYNC, which the executor finds when it next launches a gang there. The mean realized JCT and
// cost are within 10% of the predicted; the closing note has the figures and the interruptions
// realized against predicted.
//
// A benchmark of `make fidelity` (about three minutes); a run's spread (a lost node costs 15 s
// of a 75 s job) leaves the mean of 40 seeds about 3% of noise, and one seed says little: seed
// 11 (TestLocalSpotInterruptionsEmulated's) loses three nodes, +40% to +50%. Measured on a
// quiet 2-core machine: JCT +2.9%, cost -1.4%, 1.05 nodes lost a run against 0.97 expected;
// before the model followed the executor to nodes lost while they start or idle, JCT +9.5%,
// cost +2.9%, 1.18 nodes lost against 0.75 expected.
func BenchmarkFidelitySpot40PerHour(b *testing.B) {
	const seeds = 40
	tab := fidelityTable("spot at 40 interruptions per node-hour: testdata/synthetic.yaml on the local backend at time scale 0.05, the plan kept", append(fidelityCols, "INTERRUPTIONS")...)
	defer tab.Flush()
	dir := b.TempDir()
	_, src := syntheticSpec(b, dir, "unused.yaml")
	file := filepath.Join(dir, "spot40.yaml")
	text := strings.Replace(strings.ReplaceAll(src, "--spec, synthetic.yaml]", "--spec, "+file+"]"),
		"  max_nodes: 4\n", "  max_nodes: 4\n  market: spot\n  spot: {price_per_hour: 4, interruptions_per_hour: 40, notice: 10s}\n", 1)
	text = strings.Replace(text, "planner: {samples: 200}", "planner: {samples: 10000}", 1)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	plan := planFile(b, dir, file, "8,8,4,2")
	var predicted, realized runstate.Measured
	var expected float64
	lost := 0
	for seed := 1; seed <= seeds; seed++ {
		state := filepath.Join(dir, fmt.Sprint("state-", seed))
		if _, errOut, code := rbTimed(b, "run", file, "--plan", plan, "--seed", fmt.Sprint(seed), "--state", state, "--time-scale", "0.05", "--no-replan"); code != 0 {
			b.Fatalf("seed %d: %s", seed, errOut)
		}
		r := readRunReport(b, state)
		nodes := 0
		for _, in := range r.Interruptions {
			nodes += len(in.Nodes)
		}
		lost += nodes
		predicted.JCT, predicted.Cost = predicted.JCT+r.Predicted.JCT, predicted.Cost+r.Predicted.Cost
		realized.JCT, realized.Cost = realized.JCT+r.Realized.JCT, realized.Cost+r.Realized.Cost
		if seed == 1 {
			for _, st := range r.Stages {
				expected += st.Predicted.Interruptions
			}
		}
		fidelityRow(tab, fmt.Sprint(seed), r, nodes)
	}
	tab.Flush()
	dJCT, dCost := format.Pct(realized.JCT, predicted.JCT), format.Pct(realized.Cost, predicted.Cost)
	fmt.Printf("mean JCT %.1f s realized, %.1f s predicted (%+.1f%%); mean cost $%.4f realized, $%.4f predicted (%+.1f%%); %.2f interruptions a run, %.2f predicted\n",
		realized.JCT/seeds, predicted.JCT/seeds, dJCT, realized.Cost/seeds, predicted.Cost/seeds, dCost, float64(lost)/seeds, expected)
	if math.Abs(dJCT) > 10 || math.Abs(dCost) > 10 {
		b.Fatalf("mean JCT %+.1f%%, mean cost %+.1f%% off the prediction", dJCT, dCost)
	}
}

// TestSpotTable2InVirtualTime holds BenchmarkFidelitySpot's claims on the run path in virtual
// time, through the CLI: examples/paper/table2-spot.yaml under ten seeds (11 to 20, which draw
// four interruptions between them; 1 to 10 draw none at the example's 0.1 per hour), the plan
// kept. The share that meets the deadline is within the 99.9% binomial
// interval of the plans' predicted share, the mean realized cost within 5% of the mean predicted,
// and the seeds together see interruptions; one seed twice gives the same journal.
func TestSpotTable2InVirtualTime(t *testing.T) {
	t.Parallel()
	const spec, runs, deadline = "examples/paper/table2-spot.yaml", 10, 20 * 60.0
	dir := t.TempDir()
	planned := filepath.Join(dir, "plan.json") // one plan, kept: each seed is another draw of the world
	out, errOut, code := rb(t, "plan", spec, "-o", "json", "--out", planned)
	var plan planner.Report
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	met, interruptions := 0, 0
	var predicted, realized, predictedMet float64
	for seed := 11; seed < 11+runs; seed++ {
		state := filepath.Join(dir, fmt.Sprint("state-", seed))
		_, errOut, code := rb(t, "run", spec, "--plan", planned, "--backend", "virtual", "--seed", fmt.Sprint(seed), "--state", state, "--no-replan")
		if !finishedCode(code) {
			t.Fatalf("seed %d: exit %d\n%s", seed, code, errOut)
		}
		r := readRunReport(t, state)
		if (code == exitDeadlineMissed) != (r.Realized.JCT > deadline) {
			t.Fatalf("seed %d: exit %d, JCT %.1f s against the deadline %.0f s", seed, code, r.Realized.JCT, deadline)
		}
		if r.Realized.JCT <= deadline {
			met++
		}
		predictedMet += 1 - plan.Predicted.DeadlineMissProb
		interruptions += len(r.Interruptions)
		predicted += r.Predicted.Cost
		realized += r.Realized.Cost
	}
	lo, hi := sim.BinomialInterval(runs, predictedMet/runs, 0.999)
	t.Logf("%d of %d met the deadline (predicted %.0f%%, interval %d..%d); mean cost $%.3f realized, $%.3f predicted (%+.1f%%); %d interruption(s)",
		met, runs, 100*predictedMet/runs, lo, hi, realized/runs, predicted/runs, format.Pct(realized, predicted), interruptions)
	if met < lo || met > hi || math.Abs(format.Pct(realized, predicted)) > 5 || interruptions == 0 {
		t.Fatalf("%d of %d met the deadline (interval %d..%d); mean cost %+.1f%% off the prediction; %d interruptions",
			met, runs, lo, hi, format.Pct(realized, predicted), interruptions)
	}
	again := filepath.Join(dir, "again")
	if _, errOut, code := rb(t, "run", spec, "--plan", planned, "--backend", "virtual", "--seed", "12", "--state", again, "--no-replan"); !finishedCode(code) {
		t.Fatalf("seed 12 again: %s", errOut)
	}
	a, _ := os.ReadFile(filepath.Join(dir, "state-12", rundir.Journal))
	b, _ := os.ReadFile(filepath.Join(again, rundir.Journal))
	if len(a) == 0 || string(a) != string(b) {
		t.Fatalf("seed 12 twice: journals of %d and %d bytes differ", len(a), len(b))
	}
}

// Persistent stragglers emulated on the local backend (profile.slow_nodes: half the nodes twice
// as slow, seeded by the run): the journal says which nodes are slow, and a stage's trials on
// slow nodes take about twice as long as its trials on the others, as the model has it (the
// bound leaves room for process start-up on a loaded machine).
func TestLocalSlowNodesEmulated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, src := syntheticSpec(t, dir, "unused.yaml")
	file := filepath.Join(dir, "slow.yaml")
	text := strings.ReplaceAll(src, "--spec, synthetic.yaml]", "--spec, "+file+"]")
	text = strings.Replace(text, "  startup_latency: {value: 1s}\n", "  startup_latency: {value: 1s}\n  slow_nodes: {share: 0.5, factor: 2}\n", 1)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// 16 GPUs (4 nodes) for the first two stages: room for both kinds of node.
	plan := planFile(t, dir, file, "16,16,8,4")
	state := filepath.Join(dir, "state")
	if out, errOut, code := rb(t, "run", file, "--plan", plan, "--state", state, "--time-scale", "0.1", "--no-replan"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, errOut, out)
	}
	events, err := journal.ReadJournal(filepath.Join(state, rundir.Journal))
	if err != nil {
		t.Fatal(err)
	}
	slow := map[string]bool{}
	nodes := 0
	for _, e := range events {
		if e.Ev == journal.EvNodeUp && e.Node != nil {
			nodes++
			if e.Node.Slowdown == 2 {
				slow[e.Node.ID] = true
			}
		}
	}
	if len(slow) == 0 || len(slow) == nodes {
		t.Fatalf("%d of %d nodes slow at a share of 0.5 (seed 11): the test wants both kinds", len(slow), nodes)
	}
	// Per stage and GPU count, the mean time of a trial on a slow node against one on the others.
	on := map[string][]string{} // trial -> nodes of its last launch
	type key struct{ stage, gpus int }
	sums := map[key]*[2][2]float64{} // [fast, slow] x [seconds, count]
	for _, e := range events {
		switch e.Ev {
		case journal.EvLaunch:
			on[e.Trial] = e.Nodes
		case journal.EvDone:
			s := 0
			for _, n := range on[e.Trial] {
				if slow[n] {
					s = 1
				}
			}
			k := key{e.Stage, e.GPUs}
			if sums[k] == nil {
				sums[k] = &[2][2]float64{}
			}
			sums[k][s][0] += e.Seconds
			sums[k][s][1]++
		}
	}
	compared := 0
	for k, v := range sums {
		if v[0][1] == 0 || v[1][1] == 0 {
			continue
		}
		fast, slowMean := v[0][0]/v[0][1], v[1][0]/v[1][1]
		t.Logf("stage %d, %d GPUs: %.1f s on fast nodes, %.1f s on slow ones (x%.2f)", k.stage, k.gpus, fast, slowMean, slowMean/fast)
		// Twice as long in what the trainer sleeps; process start-up, the same on both kinds of
		// node, takes from the ratio, and more of it on a loaded machine (x1.56 seen under load,
		// x1.93 to x1.99 on a quiet one). Whether nodes are slow at all is what this test is for:
		// the bound below only asks that they are clearly slower.
		if slowMean < 1.15*fast || slowMean > 2.4*fast {
			t.Errorf("stage %d: a trial took %.1f s on a slow node, %.1f s on the others: not about twice", k.stage, slowMean, fast)
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no stage ran trials on both kinds of node")
	}
	r := readRunReport(t, state)
	t.Logf("JCT realized %.1f s, predicted %.1f s (%+.1f%%); cost realized $%.4f, predicted $%.4f (%+.1f%%)",
		r.Realized.JCT, r.Predicted.JCT, format.Pct(r.Realized.JCT, r.Predicted.JCT), r.Realized.Cost, r.Predicted.Cost, format.Pct(r.Realized.Cost, r.Predicted.Cost))
}

// A hedged plan on the local backend (issue 25), real trainer processes at compressed time:
// the spec offers both markets and emulates 40 interruptions an hour on spot; the first two
// stages keep one node on demand beside their spot ones (the second also a node of standby
// room), the last two run on demand. The driver rents each market apart and journals the
// on-demand tier; the market interrupts spot nodes only; the run finishes with the winner of the
// same GPUs run all on demand.
func TestLocalHedgedStages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	onDemand, src := syntheticSpec(t, dir, "on-demand.yaml")
	hedged := emulatedSpot(t, dir, src, "hedged.yaml", "markets: [on-demand, spot]")
	plan := planFile(t, dir, hedged, "16/4@:spot+1od,8/3@:spot+1od,4,2")
	state := filepath.Join(dir, "hedged")
	events := runLocal(t, hedged, plan, state)
	market := map[string]cloud.Market{}
	tier := map[string]bool{}
	asked := map[string]int{}
	for _, e := range events {
		switch e.Ev {
		case journal.EvNodeUp:
			market[e.Node.ID] = e.Node.Market
			tier[e.Node.ID] = e.Tier == spec.MarketOnDemand
		case journal.EvRequest:
			asked[e.Market]++
		}
	}
	journaled, tries, _ := checkInterruptions(t, events)
	for id := range journaled {
		if market[id] != cloud.Spot {
			t.Errorf("node %s (%s) was interrupted: only spot nodes are", id, market[id])
		}
	}
	odTier := 0
	for id, od := range tier {
		if od {
			odTier++
			if market[id] != cloud.OnDemand {
				t.Errorf("node %s in the on-demand tier is %s", id, market[id])
			}
		}
	}
	if odTier == 0 || asked[spec.MarketOnDemand] == 0 {
		t.Fatalf("no node rented for the on-demand tier (requests by market %v)", asked)
	}
	rep := readRunReport(t, state)
	if rep.Stages[0].Predicted.OnDemandNodes != 1 || rep.Stages[1].Predicted.OnDemandNodes != 1 {
		t.Errorf("the report's stages hold %d and %d on-demand nodes, the plan 1 and 1", rep.Stages[0].Predicted.OnDemandNodes, rep.Stages[1].Predicted.OnDemandNodes)
	}
	plain := filepath.Join(dir, "plain")
	os.Mkdir(plain, 0o755)
	sameWinnerAsLocal(t, nil, rep, onDemand, planFile(t, plain, onDemand, "16,8,4,2"), filepath.Join(dir, "on-demand"))
	t.Logf("%d node(s) in the on-demand tier; %d spot node(s) interrupted, %d tries relaunched; cost realized $%.4f, predicted $%.4f; JCT realized %.1f s, predicted %.1f s",
		odTier, len(journaled), tries, rep.Realized.Cost, rep.Predicted.Cost, rep.Realized.JCT, rep.Predicted.JCT)
}

// emulatedSpot writes the synthetic spec src as name in dir, on the cluster's markets (a
// cluster line: "market: spot"), with the local backend's emulated spot market: $4 an hour,
// 40 interruptions an hour, 10 s of notice. It returns its path.
func emulatedSpot(t *testing.T, dir, src, name, markets string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	text := strings.Replace(strings.ReplaceAll(src, "--spec, synthetic.yaml]", "--spec, "+path+"]"),
		"  max_nodes: 4\n", "  max_nodes: 4\n  "+markets+"\n  spot: {price_per_hour: 4, interruptions_per_hour: 40, notice: 10s}\n", 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
