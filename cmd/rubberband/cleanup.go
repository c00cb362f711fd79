package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/driver"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/term"
)

func cleanupCommand() *cli.Command {
	return &cli.Command{
		Name:  "cleanup",
		Usage: "terminate the EC2 instances rubberband rented for an experiment, or all of them, and delete their runs' security groups: the `sky down` of rubberband",
		Description: "Finds the instances carrying rubberband's tags (rubberband:run, and rubberband:experiment = NAME\n" +
			"unless --all) in the region, pending to stopped, terminates them and lists what it terminated; then\n" +
			"deletes the runs' security groups that carry the same tags, once their instances have let go of them.\n" +
			"Instances without those tags are never touched. Without --yes it lists what it would terminate and\n" +
			"asks on the terminal; when stdin is not a terminal it refuses (exit 2). Only --backend ec2 rents\n" +
			"machines that can outlive a run: local and nomad runs release their nodes themselves, and\n" +
			"`rubberband cancel RUN` stops one run and releases its nodes.",
		Flags: []cli.Flag{
			// No default: a command that terminates machines names its backend.
			&cli.StringFlag{Name: "backend", EnvVars: []string{"RUBBERBAND_BACKEND"}, Usage: driver.Names(func(k driver.Kind) bool { return k.OutlivesRun }) + ", the only backend whose machines can outlive a run"},
			&cli.StringFlag{Name: "experiment", Usage: "the experiment (the spec's name) whose instances to terminate"},
			&cli.BoolFlag{Name: "all", Usage: "terminate every instance rubberband rented in the region, of every experiment"},
			regionFlag(),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "terminate without asking"},
			outputFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return driver.UsageError("cleanup takes no arguments (--experiment NAME or --all says what to terminate)")
			}
			f := rbec2.Filter{Experiment: c.String("experiment"), All: c.Bool("all")}
			if err := driver.CheckCleanup(c.String("backend"), f); err != nil {
				return err
			}
			cfg, err := loadAWS(c)
			if err != nil {
				return err
			}
			what := driver.CleanupWhat(f)
			if !c.Bool("yes") {
				found, groups, err := driver.CleanupFound(c.Context, cfg, f)
				if err != nil {
					return err
				}
				if len(found)+len(groups) == 0 {
					return printCleanup(c, driver.CleanupResult{Region: cfg.Region, Experiment: f.Experiment, All: f.All, Terminated: []rbec2.Instance{}, Groups: []rbec2.Group{}}, what)
				}
				these := driver.CleanupCount(found, groups)
				driver.WriteFound(c.App.ErrWriter, cfg.Region, found, groups)
				if !term.IsTTY(os.Stdin) {
					return driver.UsageError("add --yes to terminate these %s of %s (stdin is not a terminal to ask on)", these, what)
				}
				if !term.Confirm(os.Stdin, c.App.ErrWriter, fmt.Sprintf("terminate these %s?", these)) {
					return &driver.CodedError{Code: driver.ExitError, Err: errors.New("cleanup: nothing terminated")}
				}
				f = driver.Confirmed(f, found, groups)
			}
			res, err := driver.Cleanup(c.Context, cfg, f)
			if res == nil {
				return err
			}
			if perr := printCleanup(c, *res, what); perr != nil {
				return perr
			}
			return err
		},
	}
}

func printCleanup(c *cli.Context, res driver.CleanupResult, what string) error {
	return printOutput(c, res, func(w io.Writer) { driver.WriteCleanup(w, res, what) })
}
