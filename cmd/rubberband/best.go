package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
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
			out := c.String("output")
			if out != "yaml" && out != "json" {
				return usageErr("--output %q: yaml or json", out)
			}
			if c.NArg() != 1 {
				return usageErr("best needs exactly one RUN argument")
			}
			st, err := openRun(c)
			if err != nil {
				return err
			}
			v, err := rundir.NewView(st)
			if err != nil {
				return err
			}
			best, err := rundir.Best(v)
			if err != nil {
				return err
			}
			if out == "json" {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(best)
			}
			return writeBestYAML(c.App.Writer, best)
		},
	}
}

// writeBestYAML writes the best configuration as YAML, ready to reuse, under a comment that says
// whose it is.
func writeBestYAML(w io.Writer, best *rundir.BestTrial) error {
	fmt.Fprintf(w, "# %s, run %s: trial %s, %s %g at iteration %d\n", best.Experiment, best.RunID, best.Trial, best.Metric, best.Value, best.Iter)
	b, err := yaml.Marshal(best.Params)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
