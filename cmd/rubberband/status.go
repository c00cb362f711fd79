package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/internal/term"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a run's progress: its stages predicted beside realized, and with --trials every trial",
		ArgsUsage: "RUN",
		Description: "RUN is a run's name or ID under the root folder (`rubberband list`), or its state directory.\n" +
			"With --watch it redraws until the run's driver stops.",
		Flags: []cli.Flag{rootFlag(), outputFlag(),
			&cli.BoolFlag{Name: "trials", Aliases: []string{"t"}, Usage: "one row per trial: stage reached, state, last metric, node"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "follow the run: redraw until its driver stops"},
			&cli.DurationFlag{Name: "interval", Value: time.Second, Usage: "how often --watch redraws"},
		},
		BashComplete: completeRun,
		Action:       statusAction,
	}
}

// statusJSON is `status -o json`: the run's report, and where the run is.
type statusJSON struct {
	*executor.Report
	Status string `json:"status"`
	Why    string `json:"why,omitempty"`
	Live   bool   `json:"live"`
}

func statusAction(c *cli.Context) error {
	if err := checkOutput(c); err != nil {
		return err
	}
	if c.NArg() != 1 {
		return usageErr("status needs exactly one RUN argument")
	}
	st, err := openRun(c)
	if err != nil {
		return err
	}
	if !c.Bool("watch") {
		out, _, err := renderStatus(c, st)
		if err == nil {
			_, err = c.App.Writer.Write(out)
		}
		return err
	}
	if c.Duration("interval") < 10*time.Millisecond {
		return usageErr("--interval %s is too short (at least 10ms)", c.Duration("interval"))
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	redraw := term.Writes(c.App.Writer)
	var last []byte
	for {
		out, live, err := renderStatus(c, st)
		if err != nil {
			return err
		}
		switch {
		case redraw:
			fmt.Fprintf(c.App.Writer, "\033[H\033[2J%s", out)
		case !bytes.Equal(out, last): // a log or a pipe gets each new state once
			if last != nil && c.String("output") == "table" {
				fmt.Fprintln(c.App.Writer)
			}
			c.App.Writer.Write(out)
		}
		last = out
		if !live {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.Duration("interval")):
		}
	}
}

// renderStatus draws the run's status once, and says whether a driver holds it now.
func renderStatus(c *cli.Context, st *rundir.State) ([]byte, bool, error) {
	v, err := rundir.NewView(st)
	if err != nil {
		return nil, false, err
	}
	status, why := v.Status()
	var buf bytes.Buffer
	if v.Res == nil {
		if c.String("output") == "json" {
			err := json.NewEncoder(&buf).Encode(statusJSON{Report: &executor.Report{Experiment: st.Exp.Name, RunID: st.Run.RunID}, Status: status, Live: v.Live})
			return buf.Bytes(), v.Live, err
		}
		fmt.Fprintf(&buf, "%s · run %s · %s · state in %s\n", st.Exp.Name, st.Run.RunID, status, st.Dir)
		return buf.Bytes(), v.Live, nil
	}
	if c.String("output") == "json" {
		rep := executor.Compare(st.Plan, v.Res)
		enc := json.NewEncoder(&buf)
		if !c.Bool("watch") {
			enc.SetIndent("", "  ")
		}
		err := enc.Encode(statusJSON{Report: &rep, Status: status, Why: why, Live: v.Live})
		return buf.Bytes(), v.Live, err
	}
	if why != "" {
		status += ": " + why
	}
	rundir.WriteTable(&buf, st, v.Res, status)
	if c.Bool("trials") {
		fmt.Fprintln(&buf)
		rundir.WriteTrials(&buf, st, v.Res)
	}
	return buf.Bytes(), v.Live, nil
}
