// Package builtin runs the built-in trainers by name: `rubberband trainer NAME` and the small
// `rubberband-trainer NAME` binary share this one piece of code. The small binary is what the
// local runtime launches when it is there: it links none of the CLI, so a launch starts in a
// few milliseconds instead of the tens the whole CLI takes to initialise, which with dozens of
// one-second trials a second is most of the executor's overhead on two cores.
package builtin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial"
	"github.com/rubberband-hpo/rubberband/trial/builtin/mlp"
	"github.com/rubberband-hpo/rubberband/trial/builtin/synthetic"
	"github.com/rubberband-hpo/rubberband/trial/rbtrain"
)

// Usage lists the trainers.
const Usage = `trainers:
  mlp                                  a neural network on the UCI digits (params: lr, momentum, hidden, l2, batch)
  synthetic --spec FILE [--metric M]   sleep as the spec's profile says and report a deterministic learning curve
                                       (RB_TIME_SCALE; fault injection: RB_SYNTH_CRASH, RB_SYNTH_HANG, RB_SYNTH_CRASH_DIR,
                                       RB_SYNTH_NOISE; a slower job: RB_SYNTH_SLOWDOWN=FACTOR from
                                       RB_SYNTH_SLOWDOWN_FROM_ITER on)
`

// ErrUsage is returned for arguments that name no trainer or bad flags.
var ErrUsage = errors.New("usage")

// Main runs the trainer args[0] with its flags args[1:], as one worker under the trainer
// contract (its environment).
func Main(ctx context.Context, args []string, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: name a trainer\n%s", ErrUsage, Usage)
	}
	switch args[0] {
	case "mlp":
		return rbtrain.Serve(mlp.Main)
	case "synthetic":
		fs := flag.NewFlagSet("synthetic", flag.ContinueOnError)
		fs.SetOutput(stderr)
		specFile := fs.String("spec", "", "the spec whose profile sets the latencies (required)")
		metric := fs.String("metric", "", "metric to report (default: the spec's objective)")
		if err := fs.Parse(args[1:]); err != nil || *specFile == "" {
			return fmt.Errorf("%w: synthetic needs --spec FILE", ErrUsage)
		}
		exp, err := spec.Load(*specFile)
		if err != nil {
			return fmt.Errorf("synthetic trainer: %w", err)
		}
		scale, _ := strconv.ParseFloat(os.Getenv("RB_TIME_SCALE"), 64)
		noise, _ := strconv.Atoi(os.Getenv("RB_SYNTH_NOISE")) // bytes of a hostile line before each report
		slowdown, from := synthetic.SlowdownFrom(os.Getenv)
		node, _ := strconv.ParseFloat(os.Getenv(trial.NodeSlowdownVar), 64)
		o := synthetic.Options{Spec: exp, Metric: *metric, TimeScale: scale,
			CrashAt: os.Getenv("RB_SYNTH_CRASH"), CrashDir: os.Getenv("RB_SYNTH_CRASH_DIR"),
			HangAt: os.Getenv("RB_SYNTH_HANG"), Noise: noise, Slowdown: slowdown, SlowdownFromIter: from, NodeSlowdown: node}
		return rbtrain.Serve(func(run *rbtrain.Run) error { return synthetic.Main(ctx, run, o) })
	}
	return fmt.Errorf("%w: %q is not a trainer\n%s", ErrUsage, args[0], Usage)
}
