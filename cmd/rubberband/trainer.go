package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/rubberband-hpo/rubberband/examples/trainers/mlp"
	"github.com/rubberband-hpo/rubberband/examples/trainers/synthetic"
	"github.com/rubberband-hpo/rubberband/spec"
	"github.com/rubberband-hpo/rubberband/trial/rbtrain"
	"github.com/urfave/cli/v2"
)

// trainerCommand runs the built-in example trainers, so that `trainer.command` can name them
// without building anything: [rubberband, trainer, mlp] or [rubberband, trainer, synthetic, ...].
func trainerCommand() *cli.Command {
	return &cli.Command{
		Name:  "trainer",
		Usage: "run a built-in trainer (as a worker launched by rubberband run)",
		Subcommands: []*cli.Command{
			{
				Name:  "mlp",
				Usage: "a neural network on the UCI digits (params: lr, momentum, hidden, l2, batch)",
				Action: func(c *cli.Context) error {
					run, err := rbtrain.FromEnv()
					if err != nil {
						return err
					}
					return mlp.Main(run)
				},
			},
			{
				Name:  "synthetic",
				Usage: "sleep as the spec's profile says and report a deterministic learning curve",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "spec", Required: true, Usage: "the spec whose profile sets the latencies"},
					&cli.StringFlag{Name: "metric", Usage: "metric to report (default: the spec's objective)"},
				},
				Action: func(c *cli.Context) error {
					exp, err := spec.Load(c.String("spec"))
					if err != nil {
						return fmt.Errorf("synthetic trainer: %w", err)
					}
					run, err := rbtrain.FromEnv()
					if err != nil {
						return err
					}
					scale, _ := strconv.ParseFloat(os.Getenv("RB_TIME_SCALE"), 64)
					noise, _ := strconv.Atoi(os.Getenv("RB_SYNTH_NOISE")) // bytes of a hostile line before each report
					return synthetic.Main(c.Context, run, synthetic.Options{Spec: exp, Metric: c.String("metric"), TimeScale: scale,
						CrashAt: os.Getenv("RB_SYNTH_CRASH"), CrashDir: os.Getenv("RB_SYNTH_CRASH_DIR"),
						HangAt: os.Getenv("RB_SYNTH_HANG"), Noise: noise})
				},
			},
		},
	}
}
