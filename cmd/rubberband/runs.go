package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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
		return nil, usageErr("%s needs a RUN argument: a run's name or ID under %s, or its directory", c.Command.Name, c.String("root"))
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
				return usageErr("list takes no arguments (--root chooses the folder)")
			}
			rows := rundir.List(c.String("root"))
			if c.String("output") == "json" {
				return writeJSON(c.App.Writer, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(c.App.Writer, "no runs under %s\n", c.String("root"))
				return nil
			}
			var buf bytes.Buffer // the table is written whole
			rundir.WriteList(&buf, rows, time.Now())
			_, err := c.App.Writer.Write(buf.Bytes())
			return err
		},
	}
}

func outputFlag() cli.Flag {
	return &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}
}

func checkOutput(c *cli.Context) error {
	if o := c.String("output"); o != "table" && o != "json" {
		return usageErr("--output %q is not a format (table or json)", o)
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
