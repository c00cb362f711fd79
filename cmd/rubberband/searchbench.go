package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/bench"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/trial/builtin/objective"
	"github.com/urfave/cli/v2"
)

func searchBenchCommand() *cli.Command {
	return &cli.Command{
		Name:  "search-bench",
		Usage: "measure the samplers: regret by budget on benchmark objectives with a known optimum, in virtual time",
		Description: "Runs each sampler over --seeds seeds on each objective (" + strings.Join(objective.Names(), ", ") + "; digits trains the\n" +
			"built-in MLP for real; " + strings.Join(objective.MultiFunctions(), " and ") + " have two objectives, measured by the hypervolume their front lacks;\n" +
			"an epoch an iteration, so give it fewer --rounds), a job whose synthetic\n" +
			"trainer reports the objective's loss at the trial's fidelity, through the unchanged executor in virtual time, and\n" +
			"prints each sampler's median regret [quartiles] at a quarter, half, three quarters and all of the budget, and how\n" +
			"much of the budget it needs to reach random sampling's final median. With --optuna DIR it compares Optuna's TPE with\n" +
			"its Hyperband pruner (with two objectives: its multi-objective TPE and NSGA-II, every trial trained fully, as its\n" +
			"pruners refuse several objectives) on the same objective and total iterations (DIR/optuna-OBJECTIVE-ITERS.json, written by\n" +
			"scripts/optuna_bench.py, which --optuna-script runs when the file is missing). `make search-bench` does it all.",
		Flags: []cli.Flag{outputFlag(),
			&cli.StringFlag{Name: "objectives", Value: strings.Join(objective.Functions(), ","), Usage: "comma-separated benchmark objectives"},
			&cli.StringFlag{Name: "algorithm", Value: "hyperband", Usage: "hyperband (1 to 27 iterations, eta 3, --rounds rounds) or sha (81 trials, 1 to 27, eta 3)"},
			&cli.IntFlag{Name: "rounds", Value: 16, Usage: "Hyperband rounds a run"},
			&cli.StringFlag{Name: "samplers", Value: "random,sobol,tpe", Usage: "comma-separated samplers; options after a space, as in the spec: 'tpe, random_fraction: 0.1'"},
			&cli.IntFlag{Name: "seeds", Value: 20, Usage: "seeds per sampler"},
			&cli.StringFlag{Name: "optuna", Usage: "folder of Optuna's trajectories (compared when there)"},
			&cli.StringFlag{Name: "optuna-script", Usage: "runs it (/usr/bin/python3 SCRIPT) for a trajectory --optuna lacks"},
			&cli.StringFlag{Name: "plots", Usage: "write a PNG chart of regret against GPU dollars per objective into this folder"},
		},
		Action: searchBenchAction,
		Subcommands: []*cli.Command{searchBenchCostCommand(), {
			Name:      "objective",
			Usage:     "answer a benchmark's losses over standard input and output (how scripts/optuna_bench.py evaluates digits)",
			ArgsUsage: "NAME",
			Description: "Reads one JSON request a line, {\"params\": {...}, \"iter\": N, \"max_iter\": M} or {\"params\": {...}, \"final\": true},\n" +
				"and writes one reply a line, {\"value\": LOSS} or {\"error\": \"...\"}, until standard input ends.",
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return driver.UsageError("search-bench objective takes one benchmark name (%s)", strings.Join(objective.Names(), ", "))
				}
				o, err := objective.Lookup(c.Args().First())
				if err != nil {
					return driver.UsageError("%v", err)
				}
				return bench.ServeObjective(c.Context, o, os.Stdin, c.App.Writer)
			},
		}},
	}
}

func searchBenchCostCommand() *cli.Command {
	return &cli.Command{
		Name:  "cost",
		Usage: "does ranking by cost_usd too find as good a configuration that trains for less? (in virtual time)",
		Description: "Runs a benchmark's job twice a seed under one plan and budget: ranked by its first loss alone, then by that loss\n" +
			"and each trial's cost_usd. For each seed it prints the first run's best, and the cheapest configuration on the\n" +
			"second run's Pareto front that costs less and whose noise-free loss is at most --within above the best's, with\n" +
			"what training each fully costs. curves-latency's configurations train at speeds of their own (larger batches run an epoch faster).",
		Flags: []cli.Flag{outputFlag(),
			&cli.StringFlag{Name: "objective", Value: "curves-latency", Usage: "benchmark objective"},
			&cli.StringFlag{Name: "algorithm", Value: "hyperband", Usage: "hyperband (1 to 27 iterations, eta 3, --rounds rounds) or sha"},
			&cli.IntFlag{Name: "rounds", Value: 16, Usage: "Hyperband rounds a run"},
			&cli.StringFlag{Name: "sampler", Value: "tpe", Usage: "sampler, options after a space as in the spec"},
			&cli.IntFlag{Name: "seeds", Value: 10, Usage: "seeds (each two runs)"},
			&cli.StringFlag{Name: "within", Value: "1%", Usage: "how far above the best's loss a pick may be: a share of the best's (1%) or a loss (0.01, a point of accuracy for an error rate)"},
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			suite := bench.Suite{Algorithm: c.String("algorithm"), Rounds: c.Int("rounds"), Seeds: c.Int("seeds")}
			if err := suite.Check(); err != nil {
				return driver.UsageError("%v", err)
			}
			within, relative, err := bench.ParseWithin(c.String("within"))
			if err != nil {
				return driver.UsageError("%v", err)
			}
			if _, err := objective.Lookup(c.String("objective")); err != nil {
				return driver.UsageError("--objective: %v", err)
			}
			dir, err := os.MkdirTemp("", "rubberband-cost-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			r, err := bench.CostOfAccuracy(c.Context, bench.Case{Objective: c.String("objective"), Algorithm: c.String("algorithm"), Rounds: c.Int("rounds")},
				c.String("sampler"), c.Int("seeds"), within, relative, dir, func(done, total int) {
					fmt.Fprintf(c.App.ErrWriter, "\r%s: %d of %d seeds (two runs each)", c.String("objective"), done, total)
				})
			fmt.Fprintln(c.App.ErrWriter)
			if err != nil {
				return err
			}
			if c.String("output") == "json" {
				return format.JSON(c.App.Writer, r)
			}
			r.WriteTable(c.App.Writer)
			return nil
		},
	}
}

func searchBenchAction(c *cli.Context) error {
	if err := checkOutput(c); err != nil {
		return err
	}
	suite := bench.Suite{Objectives: strings.Split(c.String("objectives"), ","), Samplers: bench.SplitSamplers(c.String("samplers")),
		Algorithm: c.String("algorithm"), Rounds: c.Int("rounds"), Seeds: c.Int("seeds"), OptunaDir: c.String("optuna"), OptunaScript: c.String("optuna-script"), Plots: c.String("plots")}
	if err := suite.Check(); err != nil {
		return driver.UsageError("%v", err)
	}
	// The plots' folder is made before the work, not found missing after it (like mkdir -p).
	if dir := c.String("plots"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return driver.UsageError("--plots: %v", err)
		}
	}
	results, plotErrs, err := suite.Run(c.Context, c.App.ErrWriter, func(r bench.Result) {
		if c.String("output") != "json" {
			r.WriteTable(c.App.Writer)
			fmt.Fprintln(c.App.Writer)
		}
	})
	if in := (*bench.InputError)(nil); errors.As(err, &in) {
		return driver.UsageError("%v", in)
	} else if err != nil {
		return err
	}
	if c.String("output") == "json" {
		if err := format.JSON(c.App.Writer, results); err != nil {
			return err
		}
	}
	return errors.Join(plotErrs...)
}
