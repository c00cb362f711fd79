package main

import (
	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

func bestCommand() *cli.Command {
	return &cli.Command{
		Name:      "best",
		Usage:     "print a run's best configuration, ready to reuse (-o yaml, the default, or json with its learning curve)",
		ArgsUsage: "RUN",
		Description: "RUN is a run's name or ID under the root folder, or its state directory. The best is the top\n" +
			"trial of the brackets' last stages, as report names it; a run that has not finished a bracket has none yet.",
		Flags: []cli.Flag{rootFlag(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "yaml", Usage: "yaml (the parameters alone) or json (with the trial, its metric and learning curve)"},
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
			return rundir.WriteBest(c.App.Writer, best, c.String("output") == "json")
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
