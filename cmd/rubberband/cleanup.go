package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubberband-hpo/rubberband/driver"
	rbec2 "github.com/rubberband-hpo/rubberband/executor/cloud/ec2"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/term"
)

// cleanupResult is `cleanup -o json`.
type cleanupResult struct {
	Region     string           `json:"region"`
	Experiment string           `json:"experiment,omitempty"`
	All        bool             `json:"all,omitempty"`
	Terminated []rbec2.Instance `json:"terminated"`
	// Groups are the runs' security groups it deleted.
	Groups []rbec2.Group `json:"security_groups"`
}

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
				return usageErr("cleanup takes no arguments (--experiment NAME or --all says what to terminate)")
			}
			outlives := func(k driver.Kind) bool { return k.OutlivesRun }
			b := c.String("backend")
			switch kind, err := driver.Lookup(b); {
			case b == "":
				return usageErr("cleanup needs --backend %s, the only backend whose machines can outlive a run", driver.Names(outlives))
			case err != nil:
				return usageErr("--backend %q is not a backend cleanup knows (%s)", b, driver.Names(outlives))
			case !kind.OutlivesRun:
				return usageErr("cleanup is for --backend %s: %s runs release their nodes themselves when they stop "+
					"(`rubberband cancel RUN` stops one and releases its nodes)", driver.Names(outlives), b)
			}
			f := rbec2.Filter{Experiment: c.String("experiment"), All: c.Bool("all")}
			if (f.Experiment == "") == !f.All {
				return usageErr("cleanup needs exactly one of --experiment NAME and --all")
			}
			cfg, err := loadAWS(c)
			if err != nil {
				return err
			}
			res := cleanupResult{Region: cfg.Region, Experiment: f.Experiment, All: f.All, Terminated: []rbec2.Instance{}, Groups: []rbec2.Group{}}
			what := "experiment " + f.Experiment
			if f.All {
				what = "every experiment"
			}
			if !c.Bool("yes") {
				found, err := rbec2.Cleanup(c.Context, cfg, f, true)
				if err != nil {
					return err
				}
				groups, err := rbec2.CleanupGroups(c.Context, cfg, f, true)
				if err != nil {
					return err
				}
				if len(found)+len(groups) == 0 {
					return printCleanup(c, res, what)
				}
				these := strings.Join(slices.DeleteFunc([]string{plural(len(found), "instance"), plural(len(groups), "security group")},
					func(s string) bool { return s == "" }), " and ")
				fmt.Fprintf(c.App.ErrWriter, "would terminate and delete, in %s:\n", cfg.Region)
				if len(found) > 0 {
					printInstances(c.App.ErrWriter, found, "STATE")
				}
				if len(groups) > 0 {
					printGroups(c.App.ErrWriter, groups)
				}
				if !term.IsTTY(os.Stdin) {
					return usageErr("add --yes to terminate these %s of %s (stdin is not a terminal to ask on)", these, what)
				}
				if !term.Confirm(os.Stdin, c.App.ErrWriter, fmt.Sprintf("terminate these %s?", these)) {
					return &exitErr{code: exitError, err: errors.New("cleanup: nothing terminated")}
				}
				// What was confirmed, not what was rented or made since.
				f.IDs, f.Groups = make([]string, len(found)), make([]string, len(groups))
				for i, in := range found {
					f.IDs[i] = in.ID
				}
				for i, g := range groups {
					f.Groups[i] = g.ID
				}
			}
			done, err := rbec2.Cleanup(c.Context, cfg, f, false)
			if err != nil {
				return err
			}
			res.Terminated = append(res.Terminated, done...)
			// After the instances: a group goes once they have let go of it.
			gone, err := rbec2.CleanupGroups(c.Context, cfg, f, false)
			res.Groups = append(res.Groups, gone...)
			if perr := printCleanup(c, res, what); perr != nil {
				return perr
			}
			return err
		},
	}
}

// plural is n things, or "" for none.
func plural(n int, thing string) string {
	if n == 0 {
		return ""
	}
	return format.Plural(n, thing)
}

func printCleanup(c *cli.Context, res cleanupResult, what string) error {
	w := c.App.Writer
	if c.String("output") == "json" {
		return writeJSON(w, res)
	}
	if len(res.Terminated) == 0 {
		fmt.Fprintf(w, "no rubberband instances of %s in %s: nothing to terminate\n", what, res.Region)
	} else {
		printInstances(w, res.Terminated, "WAS")
		fmt.Fprintf(w, "terminated %s of %s in %s\n", format.Plural(len(res.Terminated), "instance"), what, res.Region)
	}
	if len(res.Groups) > 0 {
		printGroups(w, res.Groups)
		fmt.Fprintf(w, "deleted %s of %s in %s\n", format.Plural(len(res.Groups), "security group"), what, res.Region)
	}
	return nil
}

// printGroups is a table of the runs' security groups.
func printGroups(w io.Writer, groups []rbec2.Group) {
	t := format.NewTable(w, "SECURITY GROUP", "NAME", "VPC", "EXPERIMENT", "RUN")
	for _, g := range groups {
		t.Row(g.ID, g.Name, g.VpcID, g.Experiment, g.Run)
	}
	t.Flush()
}

// printInstances is a table of instances; state names the column of the state they were
// found in.
func printInstances(w io.Writer, insts []rbec2.Instance, state string) {
	t := format.NewTable(w, "INSTANCE", "TYPE", "ZONE", "MARKET", "EXPERIMENT", "RUN", "LAUNCHED", state)
	for _, in := range insts {
		t.Row(in.ID, in.Type, in.Zone, in.Market, in.Experiment, in.Run, format.Ago(in.LaunchTime, time.Now()), in.State)
	}
	t.Flush()
}
