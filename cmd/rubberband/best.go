package main

import (
	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

func bestCommand() *cli.Command {
	return &cli.Command{
		Name:      "best",
		Usage:     "print a run's best configuration, ready to reuse (-o yaml, the default, or json with its learning curve), or a multi-objective run's Pareto front",
		ArgsUsage: "RUN",
		Description: "RUN is a run's name or ID under the root folder, or its state directory. The best is the top\n" +
			"trial of the brackets' last stages, as report names it; a run that has not finished a bracket has none yet.\n" +
			"A run of several objectives prints its Pareto front, a table (-o json: each configuration with its curve);\n" +
			"--pick METRIC prints the configuration of the front with the best METRIC, ready to reuse.",
		Flags: []cli.Flag{rootFlag(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "yaml", Usage: "yaml (the parameters alone) or json (with the trial, its metric and learning curve)"},
			&cli.StringFlag{Name: "pick", Usage: "of a multi-objective run's Pareto front, the configuration with the best value of this objective"},
		},
		BashComplete: completeRun,
		Action: func(c *cli.Context) error {
			if err := checkBestOutput(c); err != nil {
				return err
			}
			st, err := openOneRun(c)
			if err != nil {
				return err
			}
			best, err := rundir.BestNow(st)
			if err != nil {
				return err
			}
			return writeBest(c, best)
		},
	}
}

// checkBestOutput checks best's --output: yaml or json.
func checkBestOutput(c *cli.Context) error {
	if out := c.String("output"); out != "yaml" && out != "json" {
		return driver.UsageError("--output %q: yaml or json", out)
	}
	return nil
}

// writeBest prints best as best's flags ask, here and against a server alike: --pick's
// configuration, or the best (a multi-objective run's front).
func writeBest(c *cli.Context, best *rundir.BestTrial) error {
	if metric := c.String("pick"); metric != "" {
		picked, err := rundir.Pick(best, metric)
		if err != nil {
			return driver.UsageError("%v", err)
		}
		best = picked
	}
	return rundir.WriteBest(c.App.Writer, best, c.String("output") == "json")
}
