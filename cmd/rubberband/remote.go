package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/urfave/cli/v2"
)

// serverFlags say which rubberband server a command speaks to; without them it works on this
// machine's runs as before.
func serverFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "server", EnvVars: []string{"RUBBERBAND_SERVER"}, Usage: "a rubberband server's URL: submit to it and read its runs instead of this machine's (docs/server.md)"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"RUBBERBAND_TOKEN"}, Usage: "with --server: the TOKEN that rubberband server users add printed"},
	}
}

// onServer gives cmd the server flags and, when they name a server, runs remote instead of its
// own action.
func onServer(cmd *cli.Command, remote func(c *cli.Context, cl *client.Client) error) *cli.Command {
	cmd.Flags = append(cmd.Flags, serverFlags()...)
	local := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if c.String("server") == "" {
			return local(c)
		}
		cl, err := client.New(c.String("server"), c.String("token"))
		if err != nil {
			return usageErr("%v", err)
		}
		return remoteErr(remote(c, cl))
	}
	return cmd
}

// remoteErr gives a server's answers the CLI's exit codes: 2 for what the user must change (a
// spec's problems, a refusal, a full queue, an unknown run), 3 for a plan that misses its
// deadline.
func remoteErr(err error) error {
	ce, ok := err.(*client.Error)
	if !ok {
		return err
	}
	switch {
	case ce.Status == 422 && strings.Contains(ce.Message, "deadline"):
		return &exitErr{code: exitInfeasible, err: ce}
	case ce.Status == 422 || ce.Status == 403 || ce.Status == 404 || ce.Status == 429 || ce.Status == 409:
		return &exitErr{code: exitInvalid, err: ce}
	}
	return err
}

// runRemote submits the spec and, unless --detach, follows its driver log until the run ends,
// then prints its report.
func runRemote(c *cli.Context, cl *client.Client) error {
	if c.NArg() != 1 {
		return usageErr("run needs exactly one SPEC argument")
	}
	opts, err := specOptions(c)
	if err != nil {
		return err
	}
	_, src, err := loadSpecFile(c.Args().First(), c.App.ErrWriter, opts...) // its problems, here, before sending it
	if err != nil {
		return err
	}
	run, plan, err := cl.Submit(c.Context, client.SubmissionOf(src, c.Int("priority")))
	if err != nil {
		return err
	}
	if c.String("output") != "json" && plan != nil {
		plan.WriteTable(c.App.ErrWriter)
	}
	fmt.Fprintln(c.App.ErrWriter, client.Submitted(run, cl.Base))
	if c.Bool("detach") {
		if c.String("output") == "json" {
			return writeJSON(c.App.Writer, run)
		}
		fmt.Fprintln(c.App.Writer, run.ID)
		return nil
	}
	if err := cl.Logs(c.Context, run.ID, "", true, c.App.ErrWriter); err != nil {
		return err
	}
	run, err = cl.Wait(c.Context, run.ID)
	if err != nil {
		return err
	}
	return printRemoteEnd(c, cl, run)
}

// printRemoteEnd prints how a run ended: its report (JSON), or its state, best trial and
// realized against predicted.
func printRemoteEnd(c *cli.Context, cl *client.Client, run client.Run) error {
	var rep executor.Report
	repErr := cl.Get(c.Context, run.ID, "report", &rep)
	if c.String("output") == "json" {
		if repErr != nil {
			return writeJSON(c.App.Writer, run)
		}
		if err := writeJSON(c.App.Writer, rep); err != nil || run.State != store.Finished {
			return err
		}
		return deadlineExit(rep)
	}
	if repErr != nil {
		client.WriteEnd(c.App.Writer, run, nil)
	} else {
		client.WriteEnd(c.App.Writer, run, &rep)
	}
	switch run.State {
	case store.Finished:
		if repErr == nil {
			return deadlineExit(rep)
		}
		return nil
	case store.Paused:
		return &exitErr{code: exitPaused}
	}
	return &exitErr{code: exitError}
}

// resumeRemote queues a paused run of the server again and follows it as run does.
func resumeRemote(c *cli.Context, cl *client.Client) error {
	id, err := oneRun(c)
	if err != nil {
		return err
	}
	run, err := cl.Resume(c.Context, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "rubberband: %s: queued to resume\n", run.ID)
	if err := cl.Logs(c.Context, run.ID, "", true, c.App.ErrWriter); err != nil {
		return err
	}
	if run, err = cl.Wait(c.Context, run.ID); err != nil {
		return err
	}
	return printRemoteEnd(c, cl, run)
}

func listRemote(c *cli.Context, cl *client.Client) error {
	runs, err := cl.Runs(c.Context)
	if err != nil {
		return err
	}
	if c.String("output") == "json" {
		return writeJSON(c.App.Writer, runs)
	}
	if len(runs) == 0 {
		fmt.Fprintf(c.App.Writer, "no runs on %s\n", cl.Base)
		return nil
	}
	return client.WriteRuns(c.App.Writer, runs, time.Now())
}

// oneRun is the single RUN argument of a command that speaks to a server.
func oneRun(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usageErr("%s needs exactly one RUN argument (its ID, as `rubberband list` shows)", c.Command.Name)
	}
	return c.Args().First(), nil
}

// namedRun is the run the command's single RUN argument names.
func namedRun(c *cli.Context, cl *client.Client) (client.Run, error) {
	id, err := oneRun(c)
	if err != nil {
		return client.Run{}, err
	}
	return cl.Run(c.Context, id)
}

func statusRemote(c *cli.Context, cl *client.Client) error {
	run, err := namedRun(c, cl)
	if err != nil {
		return err
	}
	if c.String("output") == "json" {
		return writeJSON(c.App.Writer, run)
	}
	client.WriteStatus(c.App.Writer, run)
	return nil
}

// logsRemote prints RUN's driver log or TRIAL's output, cleaned of terminal control codes as
// logs does here.
func logsRemote(c *cli.Context, cl *client.Client) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return usageErr("logs needs RUN and at most one TRIAL")
	}
	w, done := logWriter(c, "the log")
	defer done()
	return cl.Logs(c.Context, c.Args().Get(0), c.Args().Get(1), c.Bool("follow"), w)
}

func cancelRemote(c *cli.Context, cl *client.Client) error {
	id, err := oneRun(c)
	if err != nil {
		return err
	}
	run, err := cl.Cancel(c.Context, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "rubberband: %s: %s\n", run.ID, map[bool]string{true: "cancelled", false: "cancelling: its driver releases its nodes"}[run.State.Ended()])
	return nil
}

func reportRemote(c *cli.Context, cl *client.Client) error {
	run, err := namedRun(c, cl)
	if err != nil {
		return err
	}
	return printRemoteEnd(c, cl, run)
}

func bestRemote(c *cli.Context, cl *client.Client) error {
	id, err := oneRun(c)
	if err != nil {
		return err
	}
	var b rundir.BestTrial
	if err := cl.Get(c.Context, id, "best", &b); err != nil {
		return err
	}
	if c.String("output") == "json" {
		return writeJSON(c.App.Writer, b)
	}
	return writeBestYAML(c.App.Writer, &b)
}
