package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/internal/cliargs"
	"github.com/rubberband-hpo/rubberband/internal/devprof"
	"github.com/urfave/cli/v2"
)

func main() {
	os.Exit(devprof.Run(func() int { return run(context.Background(), os.Args, os.Stdout, os.Stderr) }))
}

// run is the whole CLI with its streams passed in, so tests can drive it in process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:  "rubberband",
		Usage: "cost-aware elastic hyperparameter tuning: plan, simulate, run",
		Description: "rubberband predicts what a Successive Halving or Hyperband job will cost and when it will end,\n" +
			"and picks the cheapest elastic allocation plan that meets a deadline.\n\n" +
			"Exit codes: 0 ok, 1 failed, 2 bad input (spec, flag, command), 3 no plan meets the deadline,\n" +
			"4 paused by an infrastructure fault (a full disk, a checkpoint store down): resume once it is mended,\n" +
			"5 finished past its deadline (the result stands; the report says DEADLINE MISSED by how much).",
		Version:   version(),
		Writer:    stdout,
		ErrWriter: stderr,
		// --sweep NAME=a,b,c carries its own commas.
		DisableSliceFlagSeparator: true,
		EnableBashCompletion:      true,
		ExitErrHandler:            func(*cli.Context, error) {},
		Commands:                  commands(),
		// Without a command: the help; with one that does not exist: a usage error.
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return driver.UsageError("%q is not a command; `rubberband help` lists them", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		OnUsageError: onUsageError,
	}
	for _, cmd := range app.Commands {
		cmd.OnUsageError = onUsageError
	}
	if len(args) > 2 && (args[1] == "help" || args[1] == "h") && args[2] != "help" && app.Command(args[2]) == nil { // urfave/cli exits 3: ours is infeasible
		fmt.Fprintf(stderr, "rubberband: %q is not a command; `rubberband help` lists them\n", args[2])
		return driver.ExitInvalid
	}
	err := app.RunContext(ctx, cliargs.FlagsFirst(app.Commands, args))
	if err == nil {
		return 0
	}
	if coded := (*driver.CodedError)(nil); !errors.As(err, &coded) || coded.Err != nil { // else said already
		fmt.Fprintln(stderr, "rubberband:", err)
	}
	return driver.ExitCode(err)
}

// commands are the CLI's commands, in the order help lists them.
func commands() []*cli.Command {
	return []*cli.Command{initCommand(), validateCommand(), planCommand(), simulateCommand(), whatifCommand(), onServer(runCommand(), runRemote), onServer(resumeCommand(), resumeRemote),
		onServer(listCommand(), listRemote), onServer(statusCommand(), statusRemote), onServer(bestCommand(), bestRemote), uiCommand(),
		onServer(logsCommand(), logsRemote), onServer(cancelCommand(), cancelRemote), onServer(reportCommand(), reportRemote), profileCommand(),
		pricesCommand(), catalogCommand(), serverCommand(), searchBenchCommand(), cleanupCommand(), iamPolicyCommand(), kubeRBACCommand(), schemaCommand(), completionCommand(), trainerCommand(), workerCommand(), nodeAgentCommand()}
}

// onUsageError makes every unknown or malformed flag exit 2, pointing at the command's help.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	name := "rubberband"
	if isSubcommand {
		name = c.Command.HelpName
	}
	return driver.UsageError("%v; `%s --help` lists the flags", err, name)
}
