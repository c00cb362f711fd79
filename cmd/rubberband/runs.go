package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

// rootFlag names the folder that holds all runs: `run` makes ROOT/NAME, and every command that
// takes a RUN finds it there by name or ID.
func rootFlag() cli.Flag {
	return &cli.StringFlag{Name: "root", EnvVars: []string{"RUBBERBAND_ROOT"}, Value: defaultRoot,
		Usage: "the folder that holds all runs, one directory each"}
}

// openRun resolves the command's RUN argument and loads its state.
func openRun(c *cli.Context) (*rundir.State, error) {
	if c.NArg() < 1 {
		return nil, driver.UsageError("%s needs a RUN argument: a run's name or ID under %s, or its directory", c.Command.Name, c.String("root"))
	}
	dir, err := rundir.Resolve(c.String("root"), c.Args().First())
	if err != nil {
		return nil, err
	}
	return rundir.Open(dir)
}

func listCommand() *cli.Command {
	return &cli.Command{
		Name:    "list",
		Aliases: []string{"ls"},
		Usage:   "list the runs under the root folder: status, stage, elapsed time, cost so far, best metric",
		Flags:   []cli.Flag{rootFlag(), outputFlag()},
		Action: func(c *cli.Context) error {
			if err := checkOutput(c); err != nil {
				return err
			}
			if c.NArg() > 0 {
				return driver.UsageError("list takes no arguments (--root chooses the folder)")
			}
			rows := rundir.List(c.String("root"))
			return printOutput(c, rows, func(w io.Writer) { rundir.WriteList(w, c.String("root"), rows, time.Now()) })
		},
	}
}

func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}
}

func checkOutput(c *cli.Context) error {
	if o := c.String("output"); o != "table" && o != "json" {
		return driver.UsageError("--output %q is not a format (table or json)", o)
	}
	return nil
}

// completeRun completes a RUN argument with the names of the runs under the root (flags as usual).
func completeRun(c *cli.Context) {
	if n := len(os.Args); n > 2 && strings.HasPrefix(os.Args[n-2], "-") || c.NArg() > 0 {
		cli.DefaultCompleteWithFlags(c.Command)(c)
		return
	}
	for _, dir := range rundir.Dirs(c.String("root")) {
		fmt.Fprintln(c.App.Writer, filepath.Base(dir))
	}
}
