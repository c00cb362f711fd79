package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rubberband-hpo/rubberband/driver"
	"github.com/rubberband-hpo/rubberband/executor/journal"
	"github.com/rubberband-hpo/rubberband/executor/runstate"
	"github.com/rubberband-hpo/rubberband/internal/format"
	"github.com/rubberband-hpo/rubberband/internal/logcap"
	"github.com/rubberband-hpo/rubberband/planner"
	"github.com/rubberband-hpo/rubberband/rundir"
	"github.com/rubberband-hpo/rubberband/rundir/mirror"
	"github.com/rubberband-hpo/rubberband/server/store/sqlstore"
	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "execute a plan (local processes, Nomad or EC2) and report realized vs predicted time and cost",
		ArgsUsage: "SPEC",
		Flags: append(predictionFlags(),
			&cli.StringFlag{Name: "planner", DefaultText: "from the spec", Usage: "planner to use when no --plan is given (overrides planner.name)"},
			rootFlag(), catalogFlag(),
			&cli.StringFlag{Name: "state", DefaultText: "ROOT/NAME, or NAME-2, NAME-3… when taken", Usage: "the run's state directory (journal, checkpoints, logs)"},
			&cli.StringFlag{Name: "plan", Usage: "run this plan file instead of planning now"},
			&cli.Float64Flag{Name: "time-scale", Value: 1, Usage: "wall seconds per spec second for emulated latencies (tests)"},
			backendFlag(driver.Usage()),
			&cli.Int64Flag{Name: "faults", Usage: "with --backend virtual: run through the fault schedule this seed draws (driver crashes, torn journal writes, lost nodes, spot notices, failed launches, crashed and hung trainers), resuming after each crash; it must end with the clean run's winner"},
			keepNodesFlag, logFormatFlag, metricsAddrFlag, noReplanFlag, trainerLogFlag,
			&cli.IntFlag{Name: "priority", Usage: "with --server: the run's place in its team's queue, higher sooner (-1000 to 1000)"},
			&cli.BoolFlag{Name: "detach", Usage: "with --server: print the run's ID once it is queued instead of following it"},
		),
		Before: checkLogFormat,
		Action: runAction,
	}
}

func resumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "finish a run whose driver died: finished trial-stages are kept, running ones restart from their checkpoints",
		ArgsUsage: "RUN",
		Flags: []cli.Flag{rootFlag(), outputFlag(),
			keepNodesFlag, logFormatFlag, metricsAddrFlag, noReplanFlag, trainerLogFlag,
			&cli.BoolFlag{Name: "force", Usage: "resume a cancelled run"},
			&cli.BoolFlag{Name: "repair-journal", Usage: "cut a damaged journal at its first damaged record (the whole file is kept beside it) and rerun what came after"},
			&cli.StringFlag{Name: "spec", Usage: "change the run's spec to this file (journaled); the stages must stay the same"},
		},
		BashComplete: completeRun,
		Before:       checkLogFormat,
		Action:       resumeAction,
	}
}

// backendFlag chooses where runs go; RUBBERBAND_BACKEND sets its default for a shell or a team.
func backendFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "backend", Value: driver.Local, EnvVars: []string{"RUBBERBAND_BACKEND"}, Usage: usage}
}

// metricsAddrFlag serves the run's Prometheus metrics while it runs (opt-in).
var metricsAddrFlag = &cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics at http://ADDR/metrics while the run goes (127.0.0.1:9464, say)"}

// logFormatFlag says how the driver's messages and progress reach standard error: text for a
// terminal, or JSON lines (log/slog's) for a log shipper. The driver log in the state directory
// stays text either way.
var logFormatFlag = &cli.StringFlag{Name: "log-format", Value: "text", Usage: "driver messages on standard error: text, or json (one object per line)"}

func checkLogFormat(c *cli.Context) error {
	if f := c.String("log-format"); f != "text" && f != "json" {
		return usageErr("--log-format %q: text or json", f)
	}
	return nil
}

// noReplanFlag keeps the plan a run began with; a run made with it keeps it when resumed.
var noReplanFlag = &cli.BoolFlag{Name: "no-replan", Usage: "keep the plan as it is: do not re-plan the stages not yet started, or an ASHA schedule from its phase on, from what the run observes (a budget is still watched)"}

var keepNodesFlag = &cli.BoolFlag{Name: "keep-nodes", Usage: "keep the nodes of a run that fails, pauses or is interrupted (they are released otherwise)"}

// trainerLogFlag bounds each trial's log and the driver log: a trainer that writes without end
// cannot fill the disk (one rotation to .log.1, with a line saying so).
var trainerLogFlag = &cli.IntFlag{Name: "trainer-log-mb", Value: logcap.DefaultMax >> 20, EnvVars: []string{"RUBBERBAND_TRAINER_LOG_MB"},
	Usage: "bound each trial's log (LOGS/TRIAL.log) and the driver log at this many MiB; past it the file is rotated once (.log.1) and says so"}

func runAction(c *cli.Context) error {
	exp, src, s, err := prepare(c)
	if err != nil {
		return err
	}
	dir := c.String("state")
	if dir == "" {
		dir = rundir.Free(c.String("root"), exp.Name)
	}
	if err := rundir.Mkdir(dir); err != nil {
		return err
	}
	backend, timeScale := c.String("backend"), c.Float64("time-scale")
	kind, err := driver.Lookup(backend)
	if err != nil {
		return err
	}
	runID := journal.NewRunID(time.Now(), rand.Uint32())
	var faults *int64
	if c.IsSet("faults") {
		if !kind.Simulated {
			return usageErr("--faults needs --backend %s", driver.Names(func(k driver.Kind) bool { return k.Simulated }))
		}
		seed := c.Int64("faults")
		faults = &seed
	}
	if kind.Simulated { // its journal is a function of the spec, its seed and the faults
		runID, timeScale = driver.VirtualRunID(exp, c.Int64("faults")), 1
	}
	lock, err := driver.Lock(dir, runID, c.App.ErrWriter)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := rundir.CheckFree(dir); err != nil {
		return err
	}
	if err := driver.Check(backend, exp); err != nil { // before planning: it may take a while
		return err
	}
	if !kind.Simulated { // the trainer runs in its folder, wherever run started
		if err := resolveWorkdir(c.App.ErrWriter, exp, src.Path); err != nil {
			return err
		}
	}
	if timeScale <= 0 {
		return usageErr("--time-scale must be above 0")
	}
	// The plan: given, or made now with the spec's planner.
	var rep *planner.Report
	if p := c.String("plan"); p != "" {
		if rep, err = rundir.ReadPlanFile(p); err != nil {
			return usageErr("%v", err)
		}
	} else {
		progress, stop := func(int) {}, func() {}
		if !exp.Algorithm.IsASHA() { // an ASHA schedule's search says nothing as it goes
			progress, stop = planTicker(c)
		}
		rep, err = planner.PlanRun(c.Context, exp, s, progress)
		stop()
		if err != nil {
			return err
		}
	}
	_, local, err := localCatalog(c)
	if err != nil {
		return err
	}
	// The spec's snapshot is the bytes planned from, not the file now: it may have changed.
	if err := driver.Create(driver.NewRun{Dir: dir, Source: src, Spec: exp, Plan: rep, Catalog: local,
		Run: rundir.RunFile{RunID: runID, Backend: backend, TimeScale: timeScale, NoReplan: c.Bool("no-replan"), Workdir: exp.Trainer.Workdir}}); err != nil {
		return err
	}
	return execute(c, dir, faults)
}

func resumeAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageErr("resume needs exactly one RUN argument")
	}
	st, err := openRun(c)
	if err != nil {
		return err
	}
	lock, err := driver.Lock(st.Dir, st.Run.RunID, c.App.ErrWriter)
	if err != nil {
		return err
	}
	defer lock.Close()
	if c.Bool("repair-journal") {
		kept, dropped, backup, err := journal.RepairJournal(filepath.Join(st.Dir, rundir.Journal), time.Now())
		if err != nil {
			return err
		}
		if backup != "" {
			fmt.Fprintf(c.App.ErrWriter, "rubberband: kept the journal's first %s, cut %s; the whole file is in %s\n", format.Plural(kept, "record"), format.Plural(dropped, "line"), backup)
		}
	}
	if p := c.String("spec"); p != "" {
		if err := changeSpec(c, st, p); err != nil {
			return err
		}
	} else if diff := st.OriginalDiff(); diff != "" {
		fmt.Fprintf(c.App.ErrWriter, "rubberband: warning: %s changed since the run started; the run goes on with its own copy (%s). `resume --spec %s` would change it:\n%s",
			st.Run.Spec, filepath.Join(st.Dir, rundir.SpecCopy), st.Run.Spec, diff)
	}
	return execute(c, st.Dir, nil)
}

// changeSpec makes the spec at path the run's spec (rundir.ChangeSpec), when its backend can
// run it.
func changeSpec(c *cli.Context, st *rundir.State, path string) error {
	opts, err := rundir.SpecOptions(st.Dir) // the catalog the run was started with
	if err != nil {
		return err
	}
	exp, src, err := loadSpecFile(path, c.App.ErrWriter, opts...)
	if err != nil {
		return err
	}
	if err := driver.Check(st.Run.Backend, exp); err != nil {
		return err
	}
	old, err := rundir.ChangeSpec(st, src, exp)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "rubberband: the run's spec is now %s:\n%s", path, rundir.LineDiff(old, src.Data))
	return nil
}

// execute runs (or resumes) the run in dir (driver.Execute) until it finishes, the user
// interrupts it (SIGINT, SIGTERM: `rubberband cancel` too), or it fails, and prints its report.
// The caller holds the state directory's lock.
func execute(c *cli.Context, dir string, faults *int64) error {
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.Int("trainer-log-mb") <= 0 {
		return usageErr("--trainer-log-mb must be at least 1 (MiB), not %d", c.Int("trainer-log-mb"))
	}
	o := driver.Options{Log: c.App.ErrWriter, JSONLog: c.String("log-format") == "json", LogMax: int64(c.Int("trainer-log-mb")) << 20,
		KeepNodes: c.Bool("keep-nodes"), Force: c.Bool("force"), NoReplan: c.Bool("no-replan"), MetricsAddr: c.String("metrics-addr"), Faults: faults}
	// A server's driver copies its journal where the next server finds it (mirror.EnvAt).
	if loc := os.Getenv(mirror.EnvAt); loc != "" {
		m, closeMirror, err := mirror.Open(ctx, loc, sqlstore.OpenRunFiles)
		if err != nil {
			return err
		}
		defer closeMirror()
		o.Mirror, o.MirrorRun = m, os.Getenv(mirror.EnvRun)
	}
	st, res, err := driver.Execute(ctx, dir, o)
	if err != nil {
		return err
	}
	return printRun(c, st, res)
}

// printRun writes a run's report: as JSON, or as its best trial, its stages predicted beside
// realized, and the totals.
func printRun(c *cli.Context, st *rundir.State, res *runstate.Result) error {
	rep := runstate.Compare(st.Plan, res)
	if c.String("output") == "json" {
		if err := writeJSON(c.App.Writer, rep); err != nil {
			return err
		}
		return deadlineExit(rep)
	}
	rundir.WriteTable(c.App.Writer, st, res, rundir.EndStatus(res))
	return deadlineExit(rep)
}

// deadlineExit is exit code 5 for a run that finished past its deadline (its report said so),
// nil otherwise.
func deadlineExit(rep runstate.Report) error {
	if rep.DeadlineMissed {
		return &exitErr{code: exitDeadlineMissed}
	}
	return nil
}
