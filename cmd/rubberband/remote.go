package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/server/client"
	"github.com/urfave/cli/v2"
)

// onServer gives cmd the flags that name a rubberband server and, when they do, runs remote
// instead of its own action, a server's answers with the CLI's exit codes (client.ExitCode);
// without them it works on this machine's runs.
func onServer(cmd *cli.Command, remote func(c *cli.Context, cl *client.Client) error) *cli.Command {
	cmd.Flags = append(cmd.Flags,
		&cli.StringFlag{Name: "server", EnvVars: []string{"RUBBERBAND_SERVER"}, Usage: "a rubberband server's URL: submit to it and read its runs instead of this machine's (docs/server.md)"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"RUBBERBAND_TOKEN"}, Usage: "with --server: the TOKEN that rubberband server users add printed"})
	local := cmd.Action
	cmd.Action = func(c *cli.Context) error {
		if c.String("server") == "" {
			return local(c)
		}
		cl, err := client.New(c.String("server"), c.String("token"))
		if err != nil {
			return driver.UsageError("%v", err)
		}
		if err = remote(c, cl); client.ExitCode(err) != 0 {
			return &driver.CodedError{Code: client.ExitCode(err), Err: err}
		}
		return err
	}
	return cmd
}

// exited is what an action returns for a call's exit code and error.
func exited(code int, err error) error {
	if err == nil && code != 0 {
		return &driver.CodedError{Code: code}
	}
	return err
}

// runRemote submits the spec and, unless --detach, follows its driver log until the run ends,
// then prints its report (client.RunSpec).
func runRemote(c *cli.Context, cl *client.Client) error {
	if c.NArg() != 1 {
		return driver.UsageError("run needs exactly one SPEC argument")
	}
	opts, err := specOptions(c)
	if err != nil {
		return err
	}
	exp, src, err := loadSpecFile(c.Args().First(), c.App.ErrWriter, opts...) // its problems, here, before sending it
	if err != nil {
		return err
	}
	if err := driver.ResolveWorkdir(c.App.ErrWriter, exp, src.Path); err != nil {
		return err
	}
	o := client.RunOptions{Priority: c.Int("priority"), Detach: c.Bool("detach"), Output: c.String("output")}
	return exited(cl.RunSpec(c.Context, src, exp, o, c.App.Writer, c.App.ErrWriter))
}

func resumeRemote(c *cli.Context, cl *client.Client) error {
	id, err := oneRun(c)
	if err != nil {
		return err
	}
	return exited(cl.ResumeAndFollow(c.Context, id, c.String("output"), c.App.Writer, c.App.ErrWriter))
}

func listRemote(c *cli.Context, cl *client.Client) error {
	return cl.PrintRuns(c.Context, c.App.Writer, c.String("output") == "json", time.Now())
}

// oneRun is the single RUN argument of a command that speaks to a server.
func oneRun(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", driver.UsageError("%s needs exactly one RUN argument (its name or ID, as `rubberband list` shows)", c.Command.Name)
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

// statusRemote prints what status prints of a run here; a run still queued there shows where
// it stands in the queue.
func statusRemote(c *cli.Context, cl *client.Client) error {
	if err := checkOutput(c); err != nil {
		return err
	}
	run, err := namedRun(c, cl)
	if err != nil {
		return err
	}
	return showStatus(c, func() ([]byte, bool, error) { return cl.RenderStatus(c.Context, run, statusOptions(c)) })
}

// logsRemote prints RUN's driver log or TRIAL's output, cleaned of terminal control codes as
// logs does here.
func logsRemote(c *cli.Context, cl *client.Client) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return driver.UsageError("logs needs RUN and at most one TRIAL")
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

// reportRemote prints what report prints of a run here, rendered by the server.
func reportRemote(c *cli.Context, cl *client.Client) error {
	if err := checkOutput(c); err != nil {
		return err
	}
	if c.String("plots") != "" {
		return driver.UsageError("--plots draws from the run's state directory, on this machine only: not with --server")
	}
	run, err := namedRun(c, cl)
	if err != nil {
		return err
	}
	return cl.Copy(c.Context, run.ID, "report", url.Values{"output": {c.String("output")}}, c.App.Writer)
}

// bestRemote prints what best prints of a run here.
func bestRemote(c *cli.Context, cl *client.Client) error {
	if err := checkBestOutput(c); err != nil {
		return err
	}
	id, err := oneRun(c)
	if err != nil {
		return err
	}
	b, err := cl.Best(c.Context, id)
	if err != nil {
		return err
	}
	return writeBest(c, b)
}
