// Package synthetic is a trainer that does no learning: each iteration lasts a latency drawn
// from a spec's profile at its world size (times RB_TIME_SCALE), and it reports a
// deterministic learning curve of its hyperparameters. It is for fidelity and scale tests: a
// job of synthetic trainers should take what the simulator predicts.
package synthetic

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/sim"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
	"github.com/rubberband-hpo/rubberband/trial/rbtrain"
)

// The environment that slows the trainer down (trainer.env): a job that falls behind its plan.
const (
	SlowdownVar         = "RB_SYNTH_SLOWDOWN"
	SlowdownFromIterVar = "RB_SYNTH_SLOWDOWN_FROM_ITER"
)

// SlowdownFrom reads SlowdownVar and SlowdownFromIterVar through getenv.
func SlowdownFrom(getenv func(string) string) (factor float64, fromIter int) {
	factor, _ = strconv.ParseFloat(getenv(SlowdownVar), 64)
	fromIter, _ = strconv.Atoi(getenv(SlowdownFromIterVar))
	return factor, fromIter
}

// Options configure the trainer.
type Options struct {
	// Spec is the experiment whose profile sets the latencies.
	Spec *spec.Experiment
	// Metric is the name reported (default: the spec's objective metric).
	Metric string
	// TimeScale multiplies every sleep (RB_TIME_SCALE).
	TimeScale float64
	// CrashAt, when "TRIAL@ITER", kills the worker (SIGKILL) when that trial reaches that
	// iteration: once, when CrashDir is set (a marker there remembers it did), else every time.
	CrashAt, CrashDir string
	// HangAt, "TRIAL@ITER", makes the worker hang there (until SIGTERM, which it then obeys
	// without a checkpoint of that iteration), once per CrashDir marker as CrashAt.
	HangAt string
	// Noise, when above 0, prints a line of that many bytes before each report: hostile output.
	Noise int
	// Slowdown, when above 1, makes every iteration from SlowdownFromIter on (1 when 0) take
	// that many times as long: a job that falls behind its plan (a degraded cluster, a profile
	// that was wrong), for re-planning.
	Slowdown         float64
	SlowdownFromIter int
	// NodeSlowdown, when above 1, makes the start-up and every iteration take that many times as
	// long: the gang runs on an emulated slow node (trial.NodeSlowdownVar).
	NodeSlowdown float64
}

// LatencyFactor is what iteration it's latency is multiplied by (the virtual backend's gangs
// slow down as this trainer does).
func (o Options) LatencyFactor(it int) float64 {
	f := max(o.NodeSlowdown, 1)
	if o.Slowdown > 1 && it >= max(o.SlowdownFromIter, 1) {
		f *= o.Slowdown
	}
	return f
}

type checkpoint struct {
	Iter int `json:"iter"`
}

// Main runs one TRAIN run.
func Main(ctx context.Context, run *rbtrain.Run, o Options) error {
	m, err := sim.NewModel(o.Spec)
	if err != nil {
		return err
	}
	if o.Metric == "" {
		o.Metric = o.Spec.Objective.Metric
	}
	if o.TimeScale <= 0 {
		o.TimeScale = 1
	}
	start := 0
	if b, ok, err := run.ReadCheckpoint("state.json"); err != nil {
		return err
	} else if ok {
		var c checkpoint
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("synthetic: checkpoint: %w", err)
		}
		start = c.Iter
	}
	var params map[string]any
	if err := run.Params(&params); err != nil {
		return err
	}
	bench, err := Objective(os.Getenv)
	if err != nil {
		return err
	}
	reports := Reports(o.Spec, bench, o.Metric, params)
	iterLatency := m.IterLatency(max(run.WorldSize, 1))
	own := IterTime(bench, params)
	// The noise is the trial's own, and another in a run of another seed (whose trials have other
	// parameters): runs of one job under several seeds are independent draws.
	key, _ := json.Marshal(params)
	r := spec.NewRand(int64(hash(run.TrialID+string(key))), uint64(start))
	// Start-up and iterations end on a schedule from the worker's start: a draw is the whole of
	// an iteration, the worker's own overhead (reports, a loaded machine's scheduling) included,
	// as a measured profile includes a real trainer's. Sleeping each draw after the report added
	// that overhead to every iteration, and a compressed time scale magnifies it (20 ms a report
	// is 0.4 s at 1/20: 15 s over the Table 2 job's last stage).
	due := time.Now()
	sleep := func(seconds float64) error {
		due = due.Add(time.Duration(seconds * float64(time.Second)))
		return sleepUntil(ctx, run, due)
	}
	if err := sleep(m.Startup.Sample(r) * max(o.NodeSlowdown, 1) * o.TimeScale); err != nil {
		return save(run, start)
	}
	for it := start + 1; it <= run.TargetIter; it++ {
		if o.CrashAt == run.TrialID+"@"+strconv.Itoa(it) && run.Rank == 0 {
			mark := filepath.Join(o.CrashDir, run.TrialID)
			if _, err := os.Stat(mark); o.CrashDir == "" || os.IsNotExist(err) {
				if o.CrashDir != "" {
					os.WriteFile(mark, nil, 0o644)
				}
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
		if o.HangAt == run.TrialID+"@"+strconv.Itoa(it) && once(o.CrashDir, run.TrialID+".hang") {
			select {
			case <-run.Terminated():
				return save(run, it-1)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := sleep(iterLatency.Sample(r) * own * o.LatencyFactor(it) * o.TimeScale); err != nil {
			return save(run, it-1)
		}
		if o.Noise > 0 && run.Rank == 0 {
			fmt.Println(strings.Repeat("x", o.Noise))
		}
		run.Report(it, reports(it))
	}
	return save(run, run.TargetIter)
}

// once reports whether the marker name in dir is new, and leaves it: an injected fault happens
// once per marker directory (every time when dir is empty).
func once(dir, name string) bool {
	if dir == "" {
		return true
	}
	mark := filepath.Join(dir, name)
	if _, err := os.Stat(mark); err == nil {
		return false
	}
	os.WriteFile(mark, nil, 0o644)
	return true
}

// Quality is a trial's final metric in [0.5, 1): a hash of its parameters, so every trial has
// its own and the same parameters always have the same.
func Quality(params map[string]any) float64 {
	b, _ := json.Marshal(params) // map keys are sorted: canonical
	return 0.5 + 0.5*float64(hash(string(b))%1_000_000)/1_000_000
}

// ObjectiveVar names a benchmark of package objective (trainer.env): the trainer then reports
// its loss at the trial's fidelity instead of the hashed learning curve.
const ObjectiveVar = "RB_SYNTH_OBJECTIVE"

// Objective is the benchmark that ObjectiveVar names in env (nil without one). Look it up once
// and share it: a trained benchmark (digits) keeps what it trained for every launch.
func Objective(env func(string) string) (*objective.Objective, error) {
	name := env(ObjectiveVar)
	if name == "" {
		return nil, nil
	}
	o, err := objective.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("synthetic: %s: %w", ObjectiveVar, err)
	}
	return &o, nil
}

// Reports is what a trial with params reports after each iteration, metric being the spec's
// first objective. With a benchmark objective (bench), its losses at fidelity iter/R, R the
// experiment's largest iteration count: the first as metric, or, for a benchmark of several
// objectives, each under its own name (and the first as metric too when the spec names it
// otherwise). Without one (nil), the hashed curve (Curve of Quality).
// Either way, every other metric the spec ranks or constrains by (spec.Experiment.Metrics, but
// cost_usd, which the run meters) is reported as Side gives it.
func Reports(exp *spec.Experiment, bench *objective.Objective, metric string, params map[string]any) func(iter int) map[string]float64 {
	var values func(iter int) map[string]float64
	switch {
	case bench == nil:
		q := Quality(params)
		values = func(iter int) map[string]float64 { return map[string]float64{metric: Curve(q, iter)} }
	case bench.Multi != nil:
		maxIter := maxIters(exp)
		values = func(iter int) map[string]float64 {
			out := make(map[string]float64, len(bench.Multi.Metrics))
			losses := bench.Multi.Losses(params, iter, maxIter)
			for i, v := range losses {
				out[bench.Multi.Metrics[i]] = v
			}
			if _, ok := out[metric]; !ok { // a spec that calls the first loss otherwise
				out[metric] = losses[0]
			}
			return out
		}
	default:
		maxIter := maxIters(exp)
		values = func(iter int) map[string]float64 {
			return map[string]float64{metric: bench.Value(params, iter, maxIter)}
		}
	}
	if !exp.MultiObjective() { // the common case, at every report of 10^5 trials in virtual time
		return values
	}
	return func(iter int) map[string]float64 {
		out := values(iter)
		for _, name := range exp.Metrics() {
			if _, ok := out[name]; !ok && name != spec.CostMetric {
				out[name] = Side(name, params, out[metric])
			}
		}
		return out
	}
}

// IterTime is what a trial with params multiplies its profile's iteration latency by: the
// benchmark's IterTime where it has one (a configuration that trains faster), else 1.
func IterTime(bench *objective.Objective, params map[string]any) float64 {
	if bench == nil || bench.IterTime == nil {
		return 1
	}
	return bench.IterTime(params)
}

func maxIters(exp *spec.Experiment) int {
	n := 0
	for _, b := range exp.Algorithm.Brackets() {
		n = max(n, b.Stages[len(b.Stages)-1].EndIter())
	}
	return n
}

// Side is a second metric of a trial whose objective is at value: one that grows with it, as a
// bigger model is both better and slower (100·value⁴), plus the trial's own offset of up to 5,
// so that maximising the objective and minimising this one conflict and their Pareto front holds
// more than one configuration.
func Side(name string, params map[string]any, value float64) float64 {
	b, _ := json.Marshal(params)
	return 100*math.Pow(value, 4) + 5*float64(hash(name+string(b))%1_000_000)/1_000_000
}

// Curve is the metric after iter iterations: it rises towards quality.
func Curve(quality float64, iter int) float64 {
	return quality * (1 - math.Exp(-float64(iter)/5))
}

func hash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// sleepUntil waits until due (at once when it is past), or until the worker is told to stop.
func sleepUntil(ctx context.Context, run *rbtrain.Run, due time.Time) error {
	t := time.NewTimer(time.Until(due))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-run.Terminated():
		return fmt.Errorf("terminated")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func save(run *rbtrain.Run, iter int) error {
	if run.Rank != 0 {
		return nil
	}
	b, _ := json.Marshal(checkpoint{Iter: iter})
	return run.WriteCheckpoint("state.json", b)
}
