package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
)

const torchSpec = "examples/trainers/pytorch/job.yaml"

// TestTorchTrainer is `make test-torch`: the PyTorch DDP trainer of examples/trainers/pytorch,
// unchanged, through `rubberband profile` and `rubberband run` on the local backend, on CPU (gloo).
// The run's plan gives the last stage's one trial two "GPUs" (cores): it is relaunched as a gang of
// two workers (WORLD_SIZE=2) from the checkpoint its one-worker launch wrote in the stage before,
// continues from that checkpoint's iteration, and wins with its reported val_accuracy. It logs what
// an iteration takes at 1 and 2 workers and what the migration cost.
//
// Opt-in (RB_TORCH=1): it needs PyTorch for /usr/bin/python3 (scripts/torch.sh installs Debian's
// python3-torch, about 650 MB); with RB_TORCH=1 a missing torch is a failure.
func TestTorchTrainer(t *testing.T) {
	if os.Getenv("RB_TORCH") != "1" {
		t.Skip("the PyTorch trainer test runs under `make test-torch` (RB_TORCH=1), which installs python3-torch first")
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import torch, torch.distributed as d; assert d.is_gloo_available()").CombinedOutput(); err != nil {
		t.Fatalf("RB_TORCH=1 but /usr/bin/python3 has no torch with gloo (scripts/torch.sh installs it): %v\n%s", err, out)
	}
	tmp := t.TempDir()

	// Time per iteration at 1 and 2 workers, as `rubberband profile` measures it (the plain build:
	// the race detector would slow the driver's timing of reports).
	prof := filepath.Join(tmp, "profile.yaml")
	began := time.Now()
	_, errOut, code := rbTimed(t, "profile", torchSpec, "--gpus", "1,2", "--iters", "5", "--out", prof)
	if code != 0 {
		t.Fatalf("profile exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(prof); err != nil {
		t.Fatalf("profile wrote no file: %v", err)
	}
	t.Logf("profile took %.1f s", time.Since(began).Seconds())
	iterAt, startup := map[int]float64{}, map[int]float64{}
	for _, m := range regexp.MustCompile(`(\d+) GPU\(s\): ([0-9.]+) s per iteration \(std [0-9.]+\), start-up ([0-9.]+) s`).FindAllStringSubmatch(errOut, -1) {
		g, _ := strconv.Atoi(m[1])
		iterAt[g], _ = strconv.ParseFloat(m[2], 64)
		startup[g], _ = strconv.ParseFloat(m[3], 64)
	}
	if iterAt[1] <= 0 || iterAt[2] <= 0 {
		t.Fatalf("profile measured no iteration at 1 and 2 workers:\n%s", errOut)
	}
	t.Logf("time per iteration (one epoch of the digits): 1 worker %.3f s, 2 workers %.3f s (x%.2f); launch start-up %.2f s and %.2f s",
		iterAt[1], iterAt[2], iterAt[1]/iterAt[2], startup[1], startup[2])

	// The job: SHA(4, 1, 6, 2), stages of 4, 2 and 1 trials on 2, 2 and 2 GPUs: one worker per
	// trial in waves, one each, then both for the last trial.
	plan := planFile(t, tmp, torchSpec, "2,2,2")
	state := filepath.Join(tmp, "state")
	began = time.Now()
	out, errOut, code := rb(t, "run", torchSpec, "--plan", plan, "--state", state, "-o", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s\n%s", code, errOut, out)
	}
	t.Logf("run took %.1f s", time.Since(began).Seconds())
	var rep runstate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !rep.Finished || rep.Best == nil {
		t.Fatalf("report %s", out)
	}

	// The launches: which trial ran with two workers, and in which stage.
	events := readJournal(t, state)
	type launch struct {
		at    time.Time
		gpus  int
		stage int
		first *journal.Event // its first report
		last  *journal.Event // its last report
		done  *journal.Event
		iters []float64 // the seconds of each iteration it reported (the trainer's epoch_seconds)
	}
	var launches []*launch
	current := map[string]*launch{}
	reports := map[string][]int{} // trial -> iterations reported, in order
	for i := range events {
		e := &events[i]
		switch e.Ev {
		case journal.EvLaunch:
			l := &launch{at: e.At, gpus: e.GPUs, stage: e.Stage}
			launches = append(launches, l)
			current[e.Trial] = l
		case journal.EvReport:
			reports[e.Trial] = append(reports[e.Trial], e.Iter)
			if l := current[e.Trial]; l != nil {
				if l.first == nil {
					l.first = e
				}
				l.last = e
				l.iters = append(l.iters, e.Metrics["epoch_seconds"])
			}
		case journal.EvDone:
			if l := current[e.Trial]; l != nil {
				l.done = e
			}
		case journal.EvFail:
			t.Errorf("trial %s failed in stage %d: %s", e.Trial, e.Stage, e.Error)
		}
	}
	var migrated string
	var two *launch
	var seen []string
	for trial, l := range current {
		seen = append(seen, trial+":"+strconv.Itoa(l.gpus))
		if l.gpus == 2 {
			migrated, two = trial, l
		}
	}
	if two == nil || two.stage == 0 || two.first == nil || two.done == nil {
		t.Fatalf("no trial was launched with 2 workers after stage 0 and finished (last launches, trial:GPUs: %v)", seen)
	}

	// It continued from its checkpoint: its reports run 1, 2, ... without a restart, and the
	// two-worker launch began one past the iteration the stage before left it at.
	its := reports[migrated]
	for i, it := range its {
		if it != i+1 {
			t.Fatalf("trial %s reported iterations %v: not one run from 1", migrated, its)
		}
	}
	from := two.first.Iter - 1
	if from < 1 {
		t.Fatalf("trial %s's two-worker launch started at iteration %d, not from a checkpoint", migrated, two.first.Iter)
	}
	// ... and its workers say so: both ranks, in a world of two, loaded that checkpoint.
	logb, err := os.ReadFile(filepath.Join(state, "logs", migrated+".log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(logb)
	tail := log[strings.LastIndex(log, "=== "):]
	for _, want := range []string{"2 worker(s), iterations " + strconv.Itoa(from) + " -> ",
		"[rank 0] world size 2, local rank 0, device cpu, backend gloo", "[rank 1] world size 2, local rank 1, device cpu, backend gloo",
		"[rank 0] resumed from iteration " + strconv.Itoa(from) + " ", "[rank 1] resumed from iteration " + strconv.Itoa(from) + " "} {
		if !strings.Contains(tail, want) {
			t.Fatalf("trial %s's last launch logged no %q:\n%s", migrated, want, tail)
		}
	}

	// It reported its metric, and won: the last stage's one trial is the job's best.
	if rep.Best.Trial != migrated {
		t.Fatalf("best trial %s, the migrated one is %s", rep.Best.Trial, migrated)
	}
	var result *runstate.TrialResult
	for i := range rep.Trials {
		if rep.Trials[i].ID == migrated {
			result = &rep.Trials[i]
		}
	}
	if result == nil {
		t.Fatalf("the report has no result for %s", migrated)
	}
	acc, ok := result.Metrics["val_accuracy"]
	if !ok || acc != rep.Best.Metric || acc < 0.5 || result.Iter != 6 {
		t.Fatalf("the winner's result %s, best %+v", jsonOf(result), rep.Best)
	}
	t.Logf("winner %s %v: val_accuracy %.3f at iteration %d", migrated, jsonOf(rep.Best.Params), acc, result.Iter)

	// Migration: what the two-worker relaunch took beyond its iterations, launch to exit (python
	// and torch starting, the gloo rendezvous, the restore; then the save), beside what the
	// one-worker launches took; and the same trial's iterations on one worker, then on two.
	overhead := func(l *launch) float64 {
		d := l.done.Exited.Sub(l.at).Seconds()
		for _, s := range l.iters {
			d -= s
		}
		return d
	}
	mean := func(xs []float64) float64 {
		var m float64
		for _, x := range xs {
			m += x / float64(len(xs))
		}
		return m
	}
	var ones []string
	var before *launch
	for _, l := range launches {
		if l.gpus == 1 && l.first != nil && l.done != nil {
			ones = append(ones, strconv.FormatFloat(overhead(l), 'f', 2, 64))
		}
		if l != two && l.done != nil && l.done.Trial == migrated && l.stage == two.stage-1 {
			before = l
		}
	}
	if before == nil {
		t.Fatalf("trial %s has no launch in stage %d", migrated, two.stage-1)
	}
	t.Logf("trial %s's own iterations: %.3f s on 1 worker (stage %d), %.3f s on 2 (stage %d)",
		migrated, mean(before.iters), before.stage, mean(two.iters), two.stage)
	restore := regexp.MustCompile(`\[rank 0\] resumed from iteration \d+ \((\d+) bytes, restored in ([0-9.]+) ms\)`).FindStringSubmatch(tail)
	save := regexp.MustCompile(`\[rank 0\] saved the checkpoint at iteration \d+ in ([0-9.]+) ms`).FindAllStringSubmatch(log, -1)
	if restore == nil || len(save) < 2 {
		t.Fatalf("trial %s logged no restore or no saves:\n%s", migrated, log)
	}
	t.Logf("migration of %s from 1 worker (stage %d) to 2 (stage %d) through its checkpoint at iteration %d (%s bytes): "+
		"saved in %s ms, restored in %s ms; the two-worker relaunch took %.2f s beyond its iterations, launch to exit "+
		"(the one-worker launches: %s s)",
		migrated, before.stage, two.stage, from, restore[1], save[len(save)-2][1], restore[2], overhead(two), strings.Join(ones, ", "))
}
