package main

import (
	"os"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "execute a plan (local processes, Nomad or EC2) and report realized vs predicted time and cost",
		ArgsUsage: "SPEC",
		Flags: append(append(predictionFlags(),
			&cli.StringFlag{Name: "planner", DefaultText: "from the spec", Usage: "planner to use when no --plan is given (overrides planner.name)"},
			rootFlag(), catalogFlag(),
			&cli.StringFlag{Name: "state", DefaultText: "ROOT/NAME, or NAME-2, NAME-3… when taken", Usage: "the run's state directory (journal, checkpoints, logs)"},
			&cli.StringFlag{Name: "plan", Usage: "run this plan file instead of planning now"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "wall seconds per spec second for emulated latencies (tests)"},
			backendFlag(driver.Usage()),
			&cli.Int64Flag{Name: "faults", Usage: "with --backend virtual: run through the fault schedule this seed draws (driver crashes, torn journal writes, lost nodes, spot notices, failed launches, crashed and hung trainers), resuming after each crash; it must end with the clean run's winner"}),
			driverFlags(
				&cli.IntFlag{Name: "priority", Usage: "with --server: the run's place in its team's queue, higher sooner (-1000 to 1000)"},
				&cli.BoolFlag{Name: "detach", Usage: "with --server: print the run's ID once it is queued instead of following it"})...),
		Before: checkLogFormat,
		Action: runAction,
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "finish a run whose driver died: finished trial-stages are kept, running ones restart from their checkpoints",
		ArgsUsage: "RUN",
		Flags: append([]cli.Flag{rootFlag(), outputFlag()}, driverFlags(
			&cli.BoolFlag{Name: "force", Usage: "resume a cancelled run"},
			&cli.BoolFlag{Name: "repair-journal", Usage: "cut a damaged journal at its first damaged record (the whole file is kept beside it) and rerun what came after"},
			&cli.StringFlag{Name: "spec", Usage: "change the run's spec to this file (journaled); the stages must stay the same"})...),
		BashComplete: completeRun,
		Before:       checkLogFormat,
		Action:       resumeAction,
	}
}

func runAction(c *cli.Context) error {
	exp, src, s, err := prepare(c)
	if err != nil {
		return err
	}
	_, local, err := localCatalog(c)
	if err != nil {
		return err
	}
	st, res, err := driver.StartRun(c.Context, driver.Start{Spec: exp, Source: src, Sim: s, Catalog: local,
		Dir: c.String("state"), Root: c.String("root"), Backend: c.String("backend"), TimeScale: c.Float64("time-scale"),
		Faults: setFlag(c, "faults", c.Int64), PlanFile: c.String("plan"), PlanTicker: func() (func(int), func()) { return planTicker(c) }, Exec: execOptions(c)})
	if err != nil {
		return err
	}
	return printRun(c, st, res)
}

func resumeAction(c *cli.Context) error {
	st, err := openOneRun(c)
	if err != nil {
		return err
	}
	st, res, err := driver.ResumeRun(c.Context, driver.Resume{State: st, RepairJournal: c.Bool("repair-journal"),
		SpecPath: c.String("spec"), LoadSpec: loadSpecFile, Exec: execOptions(c)})
	if err != nil {
		return err
	}
	return printRun(c, st, res)
}

// execOptions are run's and resume's flags as the driver executes a run.
func execOptions(c *cli.Context) driver.Exec {
	return driver.Exec{TrainerLogMB: c.Int("trainer-log-mb"), MirrorAt: os.Getenv(mirror.EnvAt),
		Options: driver.Options{Log: c.App.ErrWriter, JSONLog: c.String("log-format") == "json", KeepNodes: c.Bool("keep-nodes"), Force: c.Bool("force"),
			NoReplan: c.Bool("no-replan"), MetricsAddr: c.String("metrics-addr"), MirrorRun: os.Getenv(mirror.EnvRun)}}
}

// printRun prints how a run ended (rundir.WriteEnd); one that finished past its deadline exits 5.
func printRun(c *cli.Context, st *rundir.State, res *runstate.Result) error {
	rep, err := rundir.WriteEnd(c.App.Writer, st, res, c.String("output") == "json")
	if err == nil && rep.DeadlineMissed {
		return &driver.CodedError{Code: driver.ExitDeadlineMissed}
	}
	return err
}
