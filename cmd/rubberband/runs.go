package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

// rootFlag names the folder that holds all runs: `run` makes ROOT/NAME, and every command that
// takes a RUN finds it there by name or ID.
func rootFlag() cli.Flag {
	return &cli.StringFlag{Name: "root", EnvVars: []string{"RUBBERBAND_ROOT"}, Value: ".rubberband",
		Usage: "the folder that holds all runs, one directory each"}
}

// resolveRun finds the state directory a RUN argument means (rundir.Resolve); not finding one is
// a usage error.
func resolveRun(root, arg string) (string, error) {
	dir, err := rundir.Resolve(root, arg)
	if err != nil {
		return "", usageErr("%v", err)
	}
	return dir, nil
}

// runDirs are the directories under root that hold a run, in name order.
func runDirs(root string) []string { return rundir.Dirs(root) }

// openRun resolves the command's RUN argument and loads its state.
func openRun(c *cli.Context) (*state, error) {
	if c.NArg() < 1 {
		return nil, usageErr("%s needs a RUN argument: a run's name or ID under %s, or its directory", c.Command.Name, c.String("root"))
	}
	dir, err := resolveRun(c.String("root"), c.Args().First())
	if err != nil {
		return nil, err
	}
	return openState(dir)
}

// runView is a run as list and status show it: its state directory's journal replayed.
type runView = rundir.View

// runSummary is one row of `list`.
type runSummary = rundir.Summary

func viewRun(st *state) (*runView, error) { return rundir.NewView(st.shared()) }

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
			rows := []runSummary{}
			for _, dir := range runDirs(c.String("root")) {
				st, err := openState(dir)
				var v *runView
				if err == nil {
					v, err = viewRun(st)
				}
				if err != nil { // one damaged run does not hide the others
					rows = append(rows, runSummary{Name: filepath.Base(dir), Dir: dir, Status: "unreadable", Why: err.Error()})
					continue
				}
				rows = append(rows, v.Summary())
			}
			sort.SliceStable(rows, func(i, j int) bool { return rows[i].Started.Before(rows[j].Started) })
			if c.String("output") == "json" {
				return writeJSON(c.App.Writer, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(c.App.Writer, "no runs under %s\n", c.String("root"))
				return nil
			}
			var buf bytes.Buffer
			tw := newTable(&buf, "NAME", "RUN ID", "BACKEND", "STATUS", "STAGES", "STARTED", "ELAPSED", "COST", "BEST")
			for _, r := range rows {
				best := "-"
				if r.Best != nil {
					best = fmt.Sprintf("%s %.4g", r.Metric, *r.Best)
				}
				status := r.Status
				if r.Why != "" && r.Status != "interrupted" {
					status += ": " + shorten(r.Why, 40)
				}
				tw.row(r.Name, r.RunID, r.Backend, status, fmt.Sprintf("%d/%d", r.Stages, r.Of), ago(r.Started), clock(r.ElapsedS), money(r.CostUSD), best)
			}
			tw.flush()
			_, err := c.App.Writer.Write(buf.Bytes())
			return err
		},
	}
}

// ago is how long ago t was, as `nomad job status` and `sky status` print it.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return t.Local().Format("2006-01-02")
	}
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
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
	for _, dir := range runDirs(c.String("root")) {
		fmt.Fprintln(c.App.Writer, filepath.Base(dir))
	}
}
