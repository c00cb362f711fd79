package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/executor/cloud"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/internal/testkit/paperspec"
	"github.com/rubberband-hpo/rubberband/planner"
)

// hedgedTable2 writes examples/paper/table2-spot.yaml offering both markets at 5 interruptions
// per node-hour, planned at the deadline's quantile q, with the spot notice given ("": EC2's 2
// minutes, trained through: the plan is all on spot; "15s", shorter than a replacement: hedging
// pays), into dir, and returns its path.
func hedgedTable2(t testing.TB, dir string, q float64, notice string) string {
	t.Helper()
	path, err := paperspec.HedgedTable2("..", dir, q, notice)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// A hedged plan through the CLI, run in virtual time: plan (cluster.hedge by default) splits
// spot stages between the markets; run rents each stage's on-demand nodes beside its spot ones,
// the spot ones are interrupted and their gangs move to the on-demand room, and the run
// finishes; so do runs through fault schedules (crashes resumed), and re-planning at the syncs
// (hedges allowed).
func TestHedgedPlanRunsInVirtualTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spec := hedgedTable2(t, dir, 0.5, "15s")
	planned := filepath.Join(dir, "plan.json")
	out, errOut, code := rb(t, "plan", spec, "-o", "json", "--out", planned)
	var plan planner.Report
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil {
		t.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	hedged := 0
	for _, b := range plan.Brackets {
		for _, st := range b.Stages {
			if st.OnDemandNodes > 0 && st.Market == "spot" {
				hedged++
			}
		}
	}
	if hedged == 0 {
		t.Fatalf("the plan hedges no stage: %+v", plan.Brackets)
	}
	moved := 0
	for _, seed := range []int{11, 12} {
		state := filepath.Join(dir, fmt.Sprint("state-", seed))
		_, errOut, code := rb(t, "run", spec, "--plan", planned, "--backend", "virtual", "--seed", fmt.Sprint(seed), "--state", state, "--no-replan")
		if !finishedCode(code) { // a plan that meets the deadline at p50 may miss it in one world
			t.Fatalf("seed %d: exit %d\n%s", seed, code, errOut)
		}
		moved += strings.Count(errOut, "moving its gang to free on-demand room")
		rep := readRunReport(t, state)
		if !rep.Finished || rep.Best == nil {
			t.Fatalf("seed %d: not finished: %+v", seed, rep)
		}
		byMarket := map[cloud.Market]int{}
		between := false // after a sync, before the next stage begins
		for _, e := range readJournal(t, state) {
			switch e.Ev {
			case journal.EvNodeUp:
				byMarket[e.Node.Market]++
			case journal.EvSync:
				between = true
			case journal.EvStage:
				between = false
			case journal.EvRequest:
				// A stage's new nodes are asked for in its own window, as the simulator has
				// their SCALE and INIT in it (the stage on demand after the hedged ones starts
				// two): before, the window began once they were up.
				if between {
					t.Errorf("seed %d: nodes asked for between a sync and the next stage: %+v", seed, e)
				}
			}
		}
		if byMarket[cloud.OnDemand] == 0 || byMarket[cloud.Spot] == 0 {
			t.Fatalf("seed %d: nodes by market %v: a hedged plan rents both", seed, byMarket)
		}
	}
	if moved == 0 {
		t.Errorf("no interrupted gang moved to on-demand room in two seeds")
	}
	// Driver crashes, torn journal writes, lost nodes and notices: each resumed driver restores
	// the tiers from the journal and repeats open requests in their markets; every schedule
	// must end with the clean run's winner (run --faults checks it).
	for _, faults := range []int{1, 5, 7} {
		state := filepath.Join(dir, fmt.Sprint("faults-", faults))
		if _, errOut, code := rb(t, "run", spec, "--plan", planned, "--backend", "virtual", "--seed", "3", "--faults", fmt.Sprint(faults), "--state", state, "--no-replan"); !finishedCode(code) {
			t.Fatalf("fault schedule %d: exit %d\n%s", faults, code, errOut)
		}
	}
	state := filepath.Join(dir, "replanned")
	if _, errOut, code := rb(t, "run", spec, "--backend", "virtual", "--seed", "13", "--state", state); !finishedCode(code) {
		t.Fatalf("re-planned run: exit %d\n%s", code, errOut)
	}
	if rep := readRunReport(t, state); !rep.Finished {
		t.Fatalf("re-planned run not finished: %+v", rep)
	}
}

// BenchmarkHedgedTable2 measures the plan of examples/paper/table2-spot.yaml with both markets
// at 5 interruptions per node-hour (trained through EC2's 2-minute notice, it is all on spot) in
// virtual time, the plan kept (hedgedRuns says what it reports). Run it with
//
//	go test ./e2e -run '^$' -bench 'BenchmarkHedgedTable2$' -benchtime 1x
func BenchmarkHedgedTable2(b *testing.B) {
	for range b.N {
		hedgedRuns(b, hedgedTrained(b, b.TempDir()), "virtual time", 1, 20, "--backend", "virtual")
	}
}

// BenchmarkHedgedTable2Local is BenchmarkHedgedTable2 on the local backend: the synthetic
// trainer's processes, at compressed time (RB_TIME_SCALE wall seconds per spec second, 0.2 by
// default: a run of 20 minutes takes 4), RB_BENCH_RUNS runs (20 by default) from seed
// RB_BENCH_FIRST_SEED (1: a long count may be run in parts). A launch's process start is not
// compressed (at 0.1 a millisecond of it is 10 ms of the job's), so the job is planned as a user
// would plan it here: with what `rubberband profile` measures of the machine's launches (start-up,
// overhead, first-stage lag, the contention of launches at once), the paper's iterations kept.
func BenchmarkHedgedTable2Local(b *testing.B) {
	scale := cmp.Or(os.Getenv("RB_TIME_SCALE"), "0.2")
	runs, err := strconv.Atoi(cmp.Or(os.Getenv("RB_BENCH_RUNS"), "20"))
	if err != nil || runs < 1 {
		b.Fatalf("RB_BENCH_RUNS=%q: want a count of runs", os.Getenv("RB_BENCH_RUNS"))
	}
	first, err := strconv.Atoi(cmp.Or(os.Getenv("RB_BENCH_FIRST_SEED"), "1"))
	if err != nil {
		b.Fatalf("RB_BENCH_FIRST_SEED=%q: want a seed", os.Getenv("RB_BENCH_FIRST_SEED"))
	}
	for range b.N {
		dir := b.TempDir()
		spec := hedgedMeasured(b, dir, hedgedTrained(b, dir), scale)
		hedgedRuns(b, spec, "local backend at time scale "+scale, first, runs, "--time-scale", scale)
	}
}

// hedgedTrained writes hedgedTable2 at p90 into dir with the synthetic trainer, which sleeps as
// its profile says (the virtual backend draws the same from the model), and returns its path.
func hedgedTrained(b *testing.B, dir string) string {
	spec := hedgedTable2(b, dir, 0.9, "")
	f, err := os.OpenFile(spec, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(f, "trainer: {command: [%s, trainer, synthetic, --spec, %s]}\n", timed(b), spec)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return spec
}

// hedgedMeasured writes, beside spec (hedgedTrained's), the job as it is planned on this machine
// and returns its path: its profile measured by `rubberband profile` on the local backend at time
// scale (a quiet twin of the trainer, at 2 and 4 GPUs, the first two stages' trials, the first
// wave 32 launches at once), with the paper's iteration latencies, which the trainer of truth
// sleeps.
func hedgedMeasured(b *testing.B, dir, spec, scale string) string {
	text, err := os.ReadFile(spec)
	if err != nil {
		b.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^profile: \{file: (.+)\}$`).FindSubmatch(text)
	if m == nil {
		b.Fatalf("%s names no profile file", spec)
	}
	paper, err := os.ReadFile(string(m[1]))
	if err != nil {
		b.Fatal(err)
	}
	iters := regexp.MustCompile(`(?m)^iter_latency:\n(?:  .*\n)+`).Find(paper)
	if iters == nil {
		b.Fatalf("%s has no iter_latency block", m[1])
	}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		return path
	}
	quietProfile := write("quiet-profile.yaml", quietLatencies(string(paper)))
	quiet := strings.Replace(string(text), string(m[0]), "profile: {file: "+quietProfile+"}", 1)
	quietSpec := filepath.Join(dir, "quiet.yaml")
	write("quiet.yaml", strings.Replace(quiet, "--spec, "+spec+"]", "--spec, "+quietSpec+"]", 1))
	measured := filepath.Join(dir, "measured.yaml")
	if _, errOut, code := rbTimed(b, "profile", quietSpec, "--gpus", "2,4", "--iters", "2", "--rounds", "3", "--time-scale", scale, "--out", measured); code != 0 {
		b.Fatalf("profile: exit %d\n%s", code, errOut)
	}
	withIterLatency(b, measured, string(iters))
	prof, _ := os.ReadFile(measured)
	b.Logf("the profile measured, the paper's iterations kept:\n%s", prof)
	return write("measured-job.yaml", strings.Replace(string(text), string(m[0]), "profile: {file: "+measured+"}", 1))
}

// hedgedRuns plans spec (hedgedTrained's, or hedgedMeasured's) and runs the plan, kept, under
// runs seeds from first with args: it reports the mean realized cost against the predicted under
// the first 5 seeds, the runs that miss the deadline against the predicted P(miss), the mean JCT,
// and each stage's mean duration realized and predicted.
func hedgedRuns(b *testing.B, spec, where string, first, runs int, args ...string) {
	const deadline = 20 * 60.0
	dir := filepath.Dir(spec)
	planned := filepath.Join(dir, "plan.json")
	out, errOut, code := rbTimed(b, "plan", spec, "-o", "json", "--out", planned)
	var plan planner.Report
	if code != 0 || json.Unmarshal([]byte(out), &plan) != nil {
		b.Fatalf("plan: exit %d\n%s", code, errOut)
	}
	missed, costRuns := 0, min(runs, 5)
	var predicted, realized, jct float64
	var stageReal, stagePred []float64 // mean durations by stage, over the runs
	for seed := first; seed < first+runs; seed++ {
		state := filepath.Join(dir, fmt.Sprint("state-", seed))
		run := append([]string{"run", spec, "--plan", planned, "--seed", fmt.Sprint(seed), "--state", state, "--no-replan"}, args...)
		if _, errOut, code := rbTimed(b, run...); !finishedCode(code) { // exit 5: finished past the deadline, a miss
			b.Fatalf("seed %d: exit %d\n%s", seed, code, errOut)
		}
		r := readRunReport(b, state)
		for i, st := range r.Stages {
			if i >= len(stageReal) {
				stageReal, stagePred = append(stageReal, 0), append(stagePred, 0)
			}
			stageReal[i] += st.Realized.Duration / float64(runs)
			stagePred[i] += st.Predicted.Duration / float64(runs)
		}
		jct += r.Realized.JCT / float64(runs)
		if r.Realized.JCT > deadline {
			missed++
		}
		if seed < first+costRuns {
			predicted += r.Predicted.Cost
			realized += r.Realized.Cost
		}
	}
	b.Logf("hedged table2 at 5 interruptions/h, %s: mean cost over seeds %d-%d $%.3f realized, $%.3f predicted (%+.1f%%); P(miss) %d of %d seeds from %d, predicted %.0f%%",
		where, first, first+costRuns-1, realized/float64(costRuns), predicted/float64(costRuns), 100*(realized-predicted)/predicted, missed, runs, first, 100*plan.Predicted.DeadlineMissProb)
	b.Logf("mean JCT over the %d seeds %.1f s realized, %.1f s predicted", runs, jct, plan.Predicted.JCT.Mean)
	for i := range stageReal {
		b.Logf("stage %d: mean duration %.1f s realized, %.1f s predicted", i+1, stageReal[i], stagePred[i])
	}
}
