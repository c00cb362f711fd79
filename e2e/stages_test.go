package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rubberband-hpo/rubberband/internal/format"
)

// measuredSpec is what a user plans with: the job of truth (a spec in testdata whose synthetic
// trainer sleeps as its profile says) with its profile measured by `rubberband profile` on the
// local backend at the time scale its runs will take (rounds of launches of iters iterations at
// each of the GPU counts), in place of the
// profile it gives. With truthIters the trainer is profiled quiet (its iterations each its
// mean: a start-up is measured through its first iteration, whose noise a few launches do not
// average out) and the profile's iteration latencies are the truth's (a noisy trainer's mean
// takes thousands of iterations to measure within a point): what is measured then is what the
// machine adds to a launch, and the job runs the noisy trainer. It returns the job's spec and
// the profile file.
func measuredSpec(t testing.TB, dir, truth string, scale float64, gpus string, rounds, iters int, truthIters bool) (job, profile string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", truth))
	if err != nil {
		t.Fatal(err)
	}
	trainer := filepath.Join(dir, "truth-"+truth)
	if err := os.WriteFile(trainer, src, 0o644); err != nil {
		t.Fatal(err)
	}
	// The job: the trainer reads the truth; the profile is the measured file's. A profile
	// block is one line or the indented lines under it.
	var lines []string
	inProfile, iterLine := false, ""
	for _, l := range strings.Split(string(src), "\n") {
		if i := strings.Index(l, "iter_latency: {"); inProfile && i >= 0 || strings.HasPrefix(l, "profile:") && i >= 0 {
			iterLine = l[i:]
			if strings.HasPrefix(l, "profile:") { // inline: profile: {iter_latency: {...}, ...}
				iterLine = strings.TrimSuffix(iterLine[:strings.Index(iterLine, "}},")+2], ",")
			}
		}
		if inProfile && strings.HasPrefix(l, " ") {
			continue
		}
		inProfile = false
		if strings.HasPrefix(l, "profile:") {
			inProfile = true
			l = "profile: {file: measured.yaml}"
		}
		lines = append(lines, strings.ReplaceAll(l, "--spec, "+truth+"]", "--spec, "+trainer+"]"))
	}
	job = filepath.Join(dir, "job.yaml")
	jobText := strings.Join(lines, "\n")
	profiled := jobText
	if truthIters { // profile a quiet twin of the trainer
		quiet := filepath.Join(dir, "quiet-"+truth)
		if err := os.WriteFile(quiet, []byte(quietLatencies(string(src))), 0o644); err != nil {
			t.Fatal(err)
		}
		profiled = strings.ReplaceAll(jobText, trainer, quiet)
	}
	if err := os.WriteFile(job, []byte(profiled), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rbTimed(t, "profile", job, "--gpus", gpus, "--iters", fmt.Sprint(iters), "--rounds", fmt.Sprint(rounds), "--time-scale", fmt.Sprint(scale)); code != 0 {
		t.Fatalf("profile: %s", errOut)
	}
	profile = filepath.Join(dir, "measured.yaml")
	if err := os.WriteFile(job, []byte(jobText), 0o644); err != nil {
		t.Fatal(err)
	}
	if truthIters {
		if iterLine == "" {
			t.Fatalf("no iter_latency line in %s", truth)
		}
		withIterLatency(t, profile, iterLine)
	}
	return job, profile
}

// quietLatencies is a profile's or spec's text with every noisy latency (normal or lognormal,
// written with its dist or without) made its mean: a quiet twin of the trainer of truth.
func quietLatencies(text string) string {
	noise := regexp.MustCompile(`\{(?:dist: (?:normal|lognormal), )?mean: ([0-9.]+), std: [0-9.]+\}`)
	return noise.ReplaceAllString(text, "{value: $1}")
}

// withIterLatency rewrites the profile file measured with the truth's iter_latency (a line, or a
// block and its indented lines) in place of the one measured.
func withIterLatency(t testing.TB, profile, iterLatency string) {
	t.Helper()
	b, err := os.ReadFile(profile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	skipping := false
	for _, l := range strings.Split(string(b), "\n") {
		if skipping && strings.HasPrefix(l, " ") {
			continue
		}
		skipping = false
		if strings.HasPrefix(l, "iter_latency:") {
			skipping, l = true, "# iter_latency: the truth's, not measured\n"+strings.TrimRight(iterLatency, "\n")
		}
		out = append(out, l)
	}
	if err := os.WriteFile(profile, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Fidelity stage by stage: a Hyperband job (e2e/testdata/hyperband.yaml: three brackets at once,
// six stages) profiled with `rubberband profile` (12 iterations a launch: its iterations' mean
// within about a point) and run on local processes at a tenth of real
// time, the plan kept, for three seeds: every stage's time and cost beside its prediction. The
// goal is 5% a stage and 2% in total; the benchmark allows 10% and 4% for a loaded machine and
// prints what it measured (make fidelity). RB_FIDELITY_SEEDS runs other seeds.
func BenchmarkFidelityStages(b *testing.B) { fidelityStages(b) }

func fidelityStages(t testing.TB) {
	const scale = 0.1
	dir := t.TempDir()
	job, profile := measuredSpec(t, dir, "hyperband.yaml", scale, "1,2", 5, 12, false)
	prof, _ := os.ReadFile(profile)
	fmt.Printf("\nthe profile measured:\n%s", prof)
	seeds := []string{"1", "2", "3"}
	if s := os.Getenv("RB_FIDELITY_SEEDS"); s != "" {
		seeds = strings.Split(s, ",")
	}
	tab := fidelityTable("stages: e2e/testdata/hyperband.yaml profiled, then run on local processes at time scale 0.1, the plan kept",
		"SEED", "BRACKET", "STAGE", "PRED TIME", "TIME", "ΔTIME", "PRED COST", "COST", "ΔCOST")
	defer tab.Flush()
	worstTime, worstCost := 0.0, 0.0
	for _, seed := range seeds {
		state := filepath.Join(dir, "state-"+seed)
		if _, errOut, code := rbTimed(t, "run", job, "--state", state, "--time-scale", fmt.Sprint(scale), "--seed", seed, "--no-replan"); code != 0 {
			t.Fatalf("seed %s: %s", seed, errOut)
		}
		r := readRunReport(t, state)
		for _, s := range r.Stages {
			dt, dc, ok := s.Off()
			if !ok {
				t.Fatalf("seed %s: stage %s/%d has no prediction or did not finish: %+v", seed, s.Bracket, s.Stage, s)
			}
			worstTime, worstCost = max(worstTime, math.Abs(dt)), max(worstCost, math.Abs(dc))
			tab.Row(seed, s.Bracket, s.Stage+1, format.Clock(s.Predicted.Duration), format.Clock(s.Realized.Duration), fmt.Sprintf("%+.1f%%", dt),
				fmt.Sprintf("$%.4f", s.Predicted.Cost), fmt.Sprintf("$%.4f", s.Realized.Cost), fmt.Sprintf("%+.1f%%", dc))
			if math.Abs(dt) > 10 || math.Abs(dc) > 10 {
				t.Errorf("seed %s, %s stage %d: %+.1f%% in time, %+.1f%% in cost off its prediction", seed, s.Bracket, s.Stage+1, dt, dc)
			}
		}
		dj, dc := format.Pct(r.Realized.JCT, r.Predicted.JCT), format.Pct(r.Realized.Cost, r.Predicted.Cost)
		tab.Row(seed, "all", "", format.Clock(r.Predicted.JCT), format.Clock(r.Realized.JCT), fmt.Sprintf("%+.1f%%", dj),
			fmt.Sprintf("$%.4f", r.Predicted.Cost), fmt.Sprintf("$%.4f", r.Realized.Cost), fmt.Sprintf("%+.1f%%", dc))
		if math.Abs(dj) > 4 || math.Abs(dc) > 4 {
			t.Errorf("seed %s: %+.1f%% in time, %+.1f%% in cost off the prediction in total", seed, dj, dc)
		}
	}
	tab.Flush()
	fmt.Printf("the worst stage: %.1f%% in time, %.1f%% in cost (goal 5%%)\n", worstTime, worstCost)
}
