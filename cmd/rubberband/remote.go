package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/rubberband-hpo/rubberband/server/store"
	"github.com/rubberband-hpo/rubberband/trial/codebundle"
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
	exp, src, err := loadSpecFile(c.Args().First(), c.App.ErrWriter, opts...) // its problems, here, before sending it
	if err != nil {
		return err
	}
	if err := resolveWorkdir(c.App.ErrWriter, exp, src.Path); err != nil {
		return err
	}
	run, plan, err := cl.SubmitSpec(c.Context, src, exp, c.Int("priority"), c.App.ErrWriter)
	var tooLarge *codebundle.TooLargeError
	if errors.As(err, &tooLarge) { // the user's to fix: an .rbignore, another workdir
		return &exitErr{code: exitInvalid, err: err}
	}
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
	if run, err = cl.Follow(c.Context, run.ID, c.App.ErrWriter); err != nil {
		return err
	}
	return printRemoteEnd(c, cl, run)
}

// printRemoteEnd prints how a run ended: what report prints of it (rendered by the server as
// here: its tables, or its JSON), after its state and why on standard error.
func printRemoteEnd(c *cli.Context, cl *client.Client, run client.Run) error {
	end := fmt.Sprintf("%s %s: %s", run.ID, run.Name, run.State)
	if run.Message != "" {
		end += " (" + run.Message + ")"
	}
	fmt.Fprintln(c.App.ErrWriter, end)
	var rep bytes.Buffer
	switch err := cl.Copy(c.Context, run.ID, "report", url.Values{"output": {c.String("output")}}, &rep); {
	case err == nil:
		c.App.Writer.Write(rep.Bytes())
	case c.String("output") == "json": // it never started: the run is all there is
		if err := writeJSON(c.App.Writer, run); err != nil {
			return err
		}
	}
	switch run.State {
	case store.Finished:
		var end runstate.Report // the exit code says whether the deadline held
		if err := cl.Get(c.Context, run.ID, "report", &end); err != nil {
			return err
		}
		return deadlineExit(end)
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
	if run, err = cl.Follow(c.Context, run.ID, c.App.ErrWriter); err != nil {
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
		return "", usageErr("%s needs exactly one RUN argument (its name or ID, as `rubberband list` shows)", c.Command.Name)
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

// statusRemote prints what status prints of a run here, rendered by the server from the run's
// state (rundir.RenderStatus); a run still queued there shows where it stands in the queue.
func statusRemote(c *cli.Context, cl *client.Client) error {
	if err := checkOutput(c); err != nil {
		return err
	}
	run, err := namedRun(c, cl)
	if err != nil {
		return err
	}
	if run.State == store.Queued && c.String("output") != "json" && !c.Bool("watch") {
		client.WriteStatus(c.App.Writer, run) // no driver has opened it: its queue is all there is
		return nil
	}
	q := client.StatusQuery(statusOptions(c))
	return showStatus(c, func() ([]byte, bool, error) {
		var buf bytes.Buffer
		if err := cl.Copy(c.Context, run.ID, "status", q, &buf); err != nil {
			return nil, false, err
		}
		now, err := cl.Run(c.Context, run.ID)
		return buf.Bytes(), err == nil && !now.State.Settled(), err
	})
}

// logsRemote prints RUN's driver log or TRIAL's output, cleaned of terminal control codes as
// logs does here.
func logsRemote(c *cli.Context, cl *client.Client) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return usageErr("logs needs RUN and at most one TRIAL")
	}
	w, done := logWriter(c, "the log")
	defer done()
	return cl.Logs(c.Context, c.Args().Get(0), c.Args().Get(1), c.Int("tail"), c.Bool("follow"), w)
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

// reportRemote prints what report prints of a run here, rendered by the server from the run's
// journal.
func reportRemote(c *cli.Context, cl *client.Client) error {
	if err := checkOutput(c); err != nil {
		return err
	}
	if c.String("plots") != "" {
		return usageErr("--plots draws from the run's state directory, on this machine only: not with --server")
	}
	run, err := namedRun(c, cl)
	if err != nil {
		return err
	}
	return cl.Copy(c.Context, run.ID, "report", url.Values{"output": {c.String("output")}}, c.App.Writer)
}

// bestRemote prints what best prints of a run here.
func bestRemote(c *cli.Context, cl *client.Client) error {
	out := c.String("output")
	if out != "yaml" && out != "json" {
		return usageErr("--output %q: yaml or json", out)
	}
	id, err := oneRun(c)
	if err != nil {
		return err
	}
	var b rundir.BestTrial
	if err := cl.Get(c.Context, id, "best", &b); err != nil {
		return err
	}
	return rundir.WriteBest(c.App.Writer, &b, out == "json")
}
